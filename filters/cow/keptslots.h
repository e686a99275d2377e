/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The slots of a packed kept overlay (format version 3,
 * docs/overlay-format.md) in memory: which slot of the data area holds
 * each block, and which slots are taken.  keptfile.c fills it from the
 * file and writes it back into the state area; the filter's overlay
 * file (overlayfile.c) looks blocks up, takes slots for blocks written
 * for the first time and retires the slots of blocks zeroed or
 * trimmed; nbdcow looks blocks up.
 *
 * keptslots_get takes no lock (slotmap.h) and may run beside the
 * others, which the caller serializes.  A retired slot is not taken
 * again before the file is next opened: a read that looked the block
 * up before its retirement finds zeros there or the block's old data,
 * never another block's.
 */

#ifndef COW_KEPTSLOTS_H
#define COW_KEPTSLOTS_H

#include <stdbool.h>
#include <stdint.h>

#include "slotalloc.h"
#include "slotmap.h"

struct keptslots {
  struct slotmap map;           /* block b: its slot + 1, or 0 */
  struct slotalloc taken;
};

/* Empty slots for blocks blocks.  Returns 0, or -1 with errno set. */
extern int keptslots_init (struct keptslots *s, uint64_t blocks);
extern void keptslots_free (struct keptslots *s);

/* Sets *slot to block b's slot and returns true, or returns false if b
 * has none.
 */
static inline bool
keptslots_get (const struct keptslots *s, uint64_t b, uint64_t *slot)
{
  uint32_t v = slotmap_get (&s->map, b);

  *slot = (uint64_t) v - 1;
  return v != 0;
}

/* Gives block b, which has none, slot (loading a file).  Returns 0, 1
 * if another block has slot already (b then has none), or -1 with
 * errno set.
 */
extern int keptslots_assign (struct keptslots *s, uint64_t b, uint64_t slot);

/* Gives block b, which has none, the lowest free slot.  Returns 0, or
 * -1 with errno set: ENOSPC when no slot number is left, ENOMEM.
 */
extern int keptslots_take (struct keptslots *s, uint64_t b, uint64_t *slot);

/* Block b has no slot any more; its slot stays taken. */
extern void keptslots_retire (struct keptslots *s, uint64_t b);

/* One past the highest slot taken: the slots the data area spans. */
static inline uint64_t
keptslots_end (const struct keptslots *s)
{
  return slotalloc_end (&s->taken);
}

static inline bool
keptslots_is_taken (const struct keptslots *s, uint64_t slot)
{
  return slotalloc_is_taken (&s->taken, slot);
}

#endif /* COW_KEPTSLOTS_H */
