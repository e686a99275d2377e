/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The slot numbers of a packed data area (a kept overlay of format
 * version 3, docs/overlay-format.md, or a temporary file of the
 * throw-away overlays): which are taken, and the lowest free one,
 * handed out next.  A kept overlay never gives one back: the filter
 * retires a slot by forgetting its block, and the slot stays taken
 * until the file is opened again (so no read racing the retirement can
 * find another block's data there).  The temporary files give back the
 * slots of an overlay that has ended, which no one reads any more.
 *
 * Not thread-safe: the caller serializes every call.
 */

#ifndef COMMON_SLOTALLOC_H
#define COMMON_SLOTALLOC_H

#include <stdbool.h>
#include <stdint.h>

struct slotalloc {
  uint64_t *taken;              /* bit s: slot s is taken */
  uint64_t words;               /* allocated words of taken */
  uint64_t end;                 /* one past the highest slot taken */
  uint64_t next;                /* every slot below it is taken */
  uint64_t limit;               /* slot numbers are below it */
};

/* An allocator of slot numbers below limit, none taken. */
extern void slotalloc_init (struct slotalloc *a, uint64_t limit);

extern void slotalloc_free (struct slotalloc *a);

static inline bool
slotalloc_is_taken (const struct slotalloc *a, uint64_t slot)
{
  return slot / 64 < a->words && (a->taken[slot / 64] >> (slot % 64) & 1);
}

/* Marks slot (below limit) taken.  Returns 0, 1 if it was taken
 * already, or -1 with errno set (ENOMEM).
 */
extern int slotalloc_mark (struct slotalloc *a, uint64_t slot);

/* Takes the lowest free slot into *slot, searching the bitmap:
 * slotalloc_take's path where a slot below the end is free, or the
 * bitmap must grow.
 */
extern int slotalloc_take_search (struct slotalloc *a, uint64_t *slot);

/* Takes the lowest free slot into *slot.  Returns 0, or -1 with errno
 * set: ENOSPC when every number below limit is taken, ENOMEM.  Inline
 * where every slot below the end is taken and the bitmap has room.
 */
static inline int
slotalloc_take (struct slotalloc *a, uint64_t *slot)
{
  uint64_t s = a->next;

  if (s != a->end || s / 64 >= a->words || s >= a->limit)
    return slotalloc_take_search (a, slot);
  a->taken[s / 64] |= UINT64_C (1) << (s % 64);
  a->next = a->end = s + 1;
  *slot = s;
  return 0;
}

/* Takes the lowest free slot into *first, and the free slots right
 * after it, up to n (at least 1) in all.  Returns how many, or -1 with
 * errno set as slotalloc_take.
 */
extern int slotalloc_take_run (struct slotalloc *a, unsigned n,
                               uint64_t *first);

/* Gives back slot, which is taken: taken again before any higher one,
 * and the end lowered past it if it was the highest.
 */
extern void slotalloc_release (struct slotalloc *a, uint64_t slot);

/* One past the highest slot taken: the slots the data area spans. */
static inline uint64_t
slotalloc_end (const struct slotalloc *a)
{
  return a->end;
}

#endif /* COMMON_SLOTALLOC_H */
