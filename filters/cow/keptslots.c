/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

#include <config.h>

#include <errno.h>

#include "kept.h"
#include "keptslots.h"

int
keptslots_init (struct keptslots *s, uint64_t blocks)
{
  slotalloc_init (&s->taken, KEPT_SLOTS_MAX);
  return slotmap_init (&s->map, blocks);
}

void
keptslots_free (struct keptslots *s)
{
  slotmap_free (&s->map);
  slotalloc_free (&s->taken);
}

int
keptslots_assign (struct keptslots *s, uint64_t b, uint64_t slot)
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
keptslots_take (struct keptslots *s, uint64_t b, uint64_t *slot)
{
  if (slotmap_reserve (&s->map, b, 1) == -1 ||
      slotalloc_take (&s->taken, slot) == -1)
    return -1;
  slotmap_set (&s->map, b, *slot + 1);
  return 0;
}

void
keptslots_retire (struct keptslots *s, uint64_t b)
{
  slotmap_set (&s->map, b, 0);
}
