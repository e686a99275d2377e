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
  return slotmap_init (&s->map, blocks);
}

void
kept_slots_free (struct kept_slots *s)
{
  slotmap_free (&s->map);
  slotalloc_free (&s->taken);
}

int
kept_slots_assign (struct kept_slots *s, uint64_t b, uint64_t slot)
{
  int r;

  if (slotmap_reserve (&s->map, b, 1) == -1)
    return -1;
  r = slotalloc_mark (&s->taken, slot);
  if (r == 0)
    slotmap_set (&s->map, b, slot + 1);
  return r;
}

int
kept_slots_take (struct kept_slots *s, uint64_t b, uint64_t *slot)
{
  if (slotmap_reserve (&s->map, b, 1) == -1 ||
      slotalloc_take (&s->taken, slot) == -1)
    return -1;
  slotmap_set (&s->map, b, *slot + 1);
  return 0;
}

void
kept_slots_retire (struct kept_slots *s, uint64_t b)
{
  slotmap_set (&s->map, b, 0);
}
