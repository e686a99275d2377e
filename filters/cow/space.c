/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The space cap (space.h). */

#include <config.h>

#include <errno.h>
#include <inttypes.h>

#include <nbdkit-filter.h>

#include "space.h"

void
space_init (struct space *space, uint64_t bytes)
{
  spacecap_init (&space->cap, bytes);
  space->full_logged = false;
  space->refusals = 0;
}

void
space_charge (struct space *space, uint64_t bytes)
{
  spacecap_charge (&space->cap, bytes);
}

bool
space_try_take (struct space *space, uint64_t *hold, uint64_t bytes)
{
  uint64_t from_hold = 0;

  if (hold) {
    from_hold = *hold < bytes ? *hold : bytes;
    *hold -= from_hold;
  }
  if (spacecap_take (&space->cap, bytes - from_hold))
    return true;
  if (hold)
    *hold += from_hold;
  return false;
}

int
space_refuse (struct space *space, int *err)
{
  __atomic_add_fetch (&space->refusals, 1, __ATOMIC_RELAXED);
  *err = ENOSPC;
  if (!__atomic_exchange_n (&space->full_logged, true, __ATOMIC_RELAXED))
    nbdkit_error ("cow-max-size=%" PRIu64 ": the overlay is full (%" PRIu64
                  " bytes counted, all exports together): requests that "
                  "need more space fail with ENOSPC until zeroes or trims "
                  "give some back (logged once)",
                  space->cap.limit, spacecap_used (&space->cap));
  return -1;
}

int
space_take (struct space *space, uint64_t *hold, uint64_t bytes, int *err)
{
  return space_try_take (space, hold, bytes) ? 0 : space_refuse (space, err);
}

bool
space_take_spare (struct space *space, uint64_t bytes)
{
  return spacecap_take_leaving (&space->cap, bytes,
                                space_reserve_of (space->cap.limit));
}

void
space_give (struct space *space, uint64_t bytes)
{
  spacecap_give (&space->cap, bytes);
}

uint64_t
space_limit (const struct space *space)
{
  return space->cap.limit;
}

uint64_t
space_used (const struct space *space)
{
  return spacecap_used (&space->cap);
}

uint64_t
space_refusals (const struct space *space)
{
  return __atomic_load_n (&space->refusals, __ATOMIC_RELAXED);
}
