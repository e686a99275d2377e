/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The lock-free budget of bytes (spacecap.h). */

#include <config.h>

#include "spacecap.h"

void
spacecap_init (struct spacecap *cap, uint64_t limit)
{
  cap->limit = limit;
  cap->used = 0;
}

bool
spacecap_take (struct spacecap *cap, uint64_t bytes)
{
  return spacecap_take_leaving (cap, bytes, 0);
}

bool
spacecap_take_leaving (struct spacecap *cap, uint64_t bytes, uint64_t keep)
{
  uint64_t used = __atomic_load_n (&cap->used, __ATOMIC_RELAXED);

  if (keep > cap->limit)
    return false;
  do {
    if (bytes > cap->limit - keep || used > cap->limit - keep - bytes)
      return false;
  } while (!__atomic_compare_exchange_n (&cap->used, &used, used + bytes,
                                         true, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED));
  return true;
}

void
spacecap_charge (struct spacecap *cap, uint64_t bytes)
{
  __atomic_fetch_add (&cap->used, bytes, __ATOMIC_RELAXED);
}

void
spacecap_give (struct spacecap *cap, uint64_t bytes)
{
  __atomic_fetch_sub (&cap->used, bytes, __ATOMIC_RELAXED);
}

uint64_t
spacecap_used (const struct spacecap *cap)
{
  return __atomic_load_n (&cap->used, __ATOMIC_RELAXED);
}
