/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The slots of a packed data area (slotalloc.h). */

#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "slotalloc.h"

void
slotalloc_init (struct slotalloc *a, uint64_t limit)
{
  memset (a, 0, sizeof *a);
  a->limit = limit;
}

void
slotalloc_free (struct slotalloc *a)
{
  free (a->taken);
  a->taken = NULL;
  a->words = a->end = a->next = 0;
}

/* Makes room for bit slot, doubling the bitmap.  Out of line: it runs
 * seldom, and its callers stay lean.
 */
static int __attribute__ ((noinline, cold))
grow (struct slotalloc *a, uint64_t slot)
{
  uint64_t words = a->words ? a->words : 16, *taken;

  while (words <= slot / 64)
    words *= 2;
  if (words > SIZE_MAX / sizeof *taken) {
    errno = ENOMEM;
    return -1;
  }
  taken = realloc (a->taken, words * sizeof *taken);
  if (taken == NULL)
    return -1;
  memset (taken + a->words, 0, (words - a->words) * sizeof *taken);
  a->taken = taken;
  a->words = words;
  return 0;
}

/* Marks slot, which is free and below limit, taken. */
static inline int
set_taken (struct slotalloc *a, uint64_t slot)
{
  if (slot / 64 >= a->words && grow (a, slot) == -1)
    return -1;
  a->taken[slot / 64] |= UINT64_C (1) << (slot % 64);
  if (slot >= a->end)
    a->end = slot + 1;
  return 0;
}

int
slotalloc_mark (struct slotalloc *a, uint64_t slot)
{
  assert (slot < a->limit);
  if (slotalloc_is_taken (a, slot))
    return 1;
  return set_taken (a, slot);
}

int
slotalloc_take_search (struct slotalloc *a, uint64_t *slot)
{
  uint64_t s = a->next;

  /* Whole words of taken slots at a time, then bit by bit. */
  while (s < a->end) {
    if (s % 64 == 0 && s / 64 < a->words && a->taken[s / 64] == UINT64_MAX)
      s += 64;
    else if (slotalloc_is_taken (a, s))
      s++;
    else
      break;
  }
  if (s >= a->limit) {
    errno = ENOSPC;
    return -1;
  }
  if (set_taken (a, s) == -1)
    return -1;
  a->next = s + 1;
  *slot = s;
  return 0;
}

int
slotalloc_take_run (struct slotalloc *a, unsigned n, uint64_t *first)
{
  uint64_t s;
  unsigned k = 1;

  if (slotalloc_take (a, first) == -1)
    return -1;
  s = *first;
  if (s + 1 == a->end) {
    /* At the end: every slot after it is free, up to the limit. */
    if (n > a->limit - s)
      n = a->limit - s;
    if ((s + n - 1) / 64 >= a->words && grow (a, s + n - 1) == -1)
      n = 1;
    for (; k < n; ++k)
      a->taken[(s + k) / 64] |= UINT64_C (1) << ((s + k) % 64);
    a->end = s + n;
  }
  else
    while (k < n && s + k < a->limit && !slotalloc_is_taken (a, s + k) &&
           set_taken (a, s + k) == 0)
      k++;
  a->next = s + k;
  return k;
}

void
slotalloc_release (struct slotalloc *a, uint64_t slot)
{
  assert (slotalloc_is_taken (a, slot));
  a->taken[slot / 64] &= ~(UINT64_C (1) << (slot % 64));
  if (slot < a->next)
    a->next = slot;
  /* Whole free words at a time, then bit by bit. */
  while (a->end > 0 && !slotalloc_is_taken (a, a->end - 1)) {
    if (a->end % 64 == 0 && a->taken[a->end / 64 - 1] == 0)
      a->end -= 64;
    else
      a->end--;
  }
}
