/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

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

extern bool slotalloc_is_taken (const struct slotalloc *a, uint64_t slot);

/* Marks slot (below limit) taken.  Returns 0, 1 if it was taken
 * already, or -1 with errno set (ENOMEM).
 */
extern int slotalloc_mark (struct slotalloc *a, uint64_t slot);

/* Takes the lowest free slot into *slot.  Returns 0, or -1 with errno
 * set: ENOSPC when every number below limit is taken, ENOMEM.
 */
extern int slotalloc_take (struct slotalloc *a, uint64_t *slot);

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
