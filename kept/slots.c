/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A packed kept overlay's slots in memory (kept.h). */

#include <config.h>

#include <errno.h>

#include "kept.h"

int
kept_slots_init (struct kept_slots *s, uint64_t blocks)
{
  slotalloc_init (&s->taken, KEPT_SLOTS_MAX);
  if (slotmap_init (&s->map[0], blocks) == -1)
    return -1;
  if (slotmap_init (&s->map[1], blocks) == -1) {
    slotmap_free (&s->map[0]);
    return -1;
  }
  return 0;
}

void
kept_slots_free (struct kept_slots *s)
{
  slotmap_free (&s->map[0]);
  slotmap_free (&s->map[1]);
  slotalloc_free (&s->taken);
}

int
kept_slots_assign (struct kept_slots *s, uint64_t b, unsigned place,
                   uint64_t slot)
{
  int r;

  if (slotmap_reserve (&s->map[place], b, 1) == -1)
    return -1;
  r = slotalloc_mark (&s->taken, slot);
  if (r == 0)
    slotmap_set (&s->map[place], b, slot + 1);
  return r;
}

int
kept_slots_take (struct kept_slots *s, uint64_t b, unsigned place,
                 uint64_t *slot)
{
  if (slotmap_reserve (&s->map[place], b, 1) == -1 ||
      slotalloc_take (&s->taken, slot) == -1)
    return -1;
  slotmap_set (&s->map[place], b, *slot + 1);
  return 0;
}

void
kept_slots_retire (struct kept_slots *s, uint64_t b, unsigned place)
{
  slotmap_set (&s->map[place], b, 0);
}
