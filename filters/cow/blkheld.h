/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* What the blocks hold, changed under their rmw locks: the one unit of
 * the block layer that takes those locks (blk_lock_rmw, with their
 * waits counted), and the changes of a block's record (its state, the
 * units it holds and their places) in the map and then in the store,
 * which require them (docs/design.md, "Block states").  Below the
 * requests (blk.c), the copy-ups (blkcopy.c), the writes in places
 * (blkplaced.c) and the view (blkview.c); inline, as they were when
 * they were blk.c's, so that a write costs no call more.
 */

#ifndef COW_BLKHELD_H
#define COW_BLKHELD_H

#include <errno.h>

#include <nbdkit-filter.h>

#include "blkpriv.h"
#include "checks.h"

/* Takes, and lets go of, the rmw locks of blocks [first, first+n). */
static inline void
blk_lock_rmw (struct blk *blk, struct rangelock_range *held,
              uint64_t first, uint64_t n) ACQUIRE (blk->rmw_locks)
{
  lockwaits_add (&blk->waits, BLK_LOCK_RMW,
                 rangelock_lock (&blk->rmw_locks, held, first, n));
}


static inline void
blk_unlock_rmw (struct blk *blk, struct rangelock_range *held)
  RELEASE (blk->rmw_locks)
{
  rangelock_unlock (&blk->rmw_locks, held);
}

/* Makes room for a change of the states of blocks [first, first+n), in
 * the map and the store, before its I/O, so that blk_set_states cannot
 * fail after the data is written.  Returns 0, or -1 with *err set after
 * nbdkit_error.
 */
static inline int
blk_reserve_states (struct blk *blk, uint64_t first, uint64_t n, int *err)
{
  if (blkmap_reserve (&blk->map, first, n) == 0 &&
      store_reserve_blocks (blk->store, first, n, false) == 0)
    return 0;
  *err = errno;
  nbdkit_error ("cow: cannot grow the block state map: %m");
  return -1;
}

/* Sets blocks [first, first+n) to state, in the map and then in the
 * store.  Requires blk_reserve_states of them.
 */
static inline void
blk_set_states (struct blk *blk, uint64_t first, uint64_t n,
                enum blk_state state)
  REQUIRES (blk->rmw_locks)
{
  CHECK (blk_rmw_held (blk, first, n));
  blkmap_set (&blk->map, first, n, state);
  store_set_blocks (blk->store, &(struct store_blocks) {
    .first = first, .n = n, .state = state });
}

/* Makes room for block b to hold units in part and in places, in the
 * map and the store, before its I/O.  Returns 0, or -1 with *err set
 * after nbdkit_error.
 */
static inline int
blk_reserve_held (struct blk *blk, uint64_t b, int *err)
{
  if (blkmap_reserve_held (&blk->map, b) == 0 &&
      store_reserve_blocks (blk->store, b, 1, true) == 0)
    return 0;
  *err = errno;
  nbdkit_error ("cow: cannot grow the block state map: %m");
  return -1;
}

/* Block b holds units (not 0), those of where in place 1: allocated if
 * they are all of its own, else partial; in the map, then in the
 * store.  Requires blk_reserve_held of b.
 */
static inline void
blk_set_held (struct blk *blk, uint64_t b, uint32_t units, uint32_t where)
  REQUIRES (blk->rmw_locks)
{
  struct store_blocks r = { .first = b, .n = 1 };

  CHECK (blk_rmw_held (blk, b, 1));
  r.state = blkmap_set_held (&blk->map, b, units, where);
  if (r.state == BLK_PARTIAL)
    r.units = units;
  r.where = where;
  store_set_blocks (blk->store, &r);
}

/* The places units of a block go to when written (bit set: place 1),
 * the block holding now and the view keeping kept: a unit the view
 * keeps to its other place, one the block holds where it is, a new
 * one to place 0.
 */
static inline uint32_t
blk_targets (uint32_t units, const struct blkmap_held *now,
             const struct blkmap_held *kept)
{
  return (units & kept->units & ~kept->where) |
         (units & ~kept->units & now->units & now->where);
}

/* The units of those a write of the block changes in place: it holds
 * them in the place they are written to.
 */
static inline uint32_t
blk_in_place (uint32_t units, uint32_t target, const struct blkmap_held *now)
{
  return units & now->units & ~(now->where ^ target);
}

/* The part [from, to) of block b that the range [offset, end) covers. */
static inline void
blk_block_part (const struct blk *blk, uint64_t b, uint64_t offset,
                uint64_t end, uint64_t *from, uint64_t *to)
{
  uint64_t start = blockgeom_start (&blk->map.geom, b);
  uint64_t stop = blockgeom_end (&blk->map.geom, b);

  *from = offset > start ? offset : start;
  *to = end < stop ? end : stop;
}

/* Whether block b, in the given state, reads as zeros without being in
 * the overlay: zeroed before, or over a part of the base its extents
 * say reads as zeros (basemap.h).  Holds no lock but b's rmw lock: it
 * may ask the base.
 */
static inline bool
blk_reads_zeros_outside (struct blk *blk, const struct blk_base *base,
                         enum blk_state state, uint64_t b)
  REQUIRES (blk->rmw_locks)
{
  CHECK (blk_rmw_held (blk, b, 1));
  return state == BLK_ZERO ||
         (state == BLK_NOT_ALLOCATED &&
          basemap_reads_zeros (&blk->base_map, base, b));
}

#endif /* COW_BLKHELD_H */
