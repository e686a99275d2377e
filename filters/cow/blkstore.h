/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer's writes and punches of its store, each under the
 * write locks of the stripes it touches: the one unit of the layer
 * that takes them (docs/design.md, "The write locks").  Below the
 * requests (blk.c) and the view (blkview.c), which call it; inline,
 * as they were when they were blk.c's, so that the fast path of a
 * write costs no call more.
 */

#ifndef COW_BLKSTORE_H
#define COW_BLKSTORE_H

#include <nbdkit-filter.h>

#include "blkpriv.h"
#include "checks.h"
#include "pieces.h"

/* The calls, each under the write locks of the stripes of its range.
 * Those that write return 0, or -1 with *err set.
 *
 * blk_store_write writes count bytes of buf (zeros if NULL) at offset,
 * in place.  A kill -9 leaves each 4K page of it old or new: write(2)
 * copies page by page and gives way to a fatal signal only between
 * pages, which a kept overlay relies on (docs/overlay-format.md).
 *
 * blk_store_write_over_zeros writes the len bytes from start as zeros,
 * then bytes (if not NULL) over [from, to), in place 0, under the
 * locks together: a block allocated as zeros with a client's bytes.
 *
 * blk_store_write_if_held writes count bytes of buf at offset in the
 * place the blocks hold them, if they hold every byte (blkmap_holds),
 * setting *done, and else writes nothing: the lookup and the write
 * under the locks together, as every punch is, so that a block a
 * discard punches is never written after its punch.
 *
 * blk_store_write_units writes the units of block b in units, all
 * inside [from, to), whose bytes are at bytes (zeros if NULL; byte 0
 * at from), each to its place in target (bit set: place 1).
 *
 * blk_store_punch punches [offset, offset+count) of place, saying in
 * the debug log if the filesystem cannot: a punch costs space, never
 * correctness, as the states already say zeros.  blk_punch_units
 * punches units of block b out of place; requires b's rmw lock.
 */

/* The write locks of the stripes of [offset, offset+count), their
 * waits counted.
 */
static inline void
lock_stripes (struct blk *blk, uint64_t count, uint64_t offset)
  ACQUIRE (blk->stripes)
{
  lockwaits_add (&blk->waits, BLK_LOCK_WRITE,
                 stripes_lock (&blk->stripes, offset, count));
}

static inline void
unlock_stripes (struct blk *blk, uint64_t count, uint64_t offset)
  RELEASE (blk->stripes)
{
  stripes_unlock (&blk->stripes, offset, count);
}

static inline int
blk_store_write (struct blk *blk, const void *buf, uint64_t count,
                 uint64_t offset, unsigned place, int *err)
{
  int r;

  lock_stripes (blk, count, offset);
  r = store_write (blk->store, buf, count, offset, place, err);
  unlock_stripes (blk, count, offset);
  return r;
}

static inline int
blk_store_write_over_zeros (struct blk *blk, uint64_t start, uint64_t len,
                            const char *bytes, uint64_t from, uint64_t to,
                            int *err)
{
  int r;

  lock_stripes (blk, len, start);
  r = store_write (blk->store, NULL, len, start, 0, err);
  if (r == 0 && bytes)
    r = store_write (blk->store, bytes, to - from, from, 0, err);
  unlock_stripes (blk, len, start);
  return r;
}

static inline int
blk_store_write_if_held (struct blk *blk, const void *buf, uint64_t count,
                         uint64_t offset, bool *done, int *err)
{
  const struct blockgeom *g = &blk->map.geom;
  unsigned place;
  int r = 0;

  lock_stripes (blk, count, offset);
  *done = blkmap_holds (&blk->map, blockgeom_block (g, offset),
                        blockgeom_block (g, offset + count - 1), offset,
                        offset + count, &place);
  if (*done)
    r = store_write (blk->store, buf, count, offset, place, err);
  unlock_stripes (blk, count, offset);
  return r;
}

static inline int
blk_store_write_units (struct blk *blk, uint64_t b, const char *bytes,
                       uint64_t from, uint64_t to, uint32_t units,
                       uint32_t target, int *err)
{
  uint64_t start = blockgeom_start (&blk->map.geom, b), at, next;
  int place;

  for (place = 0; place <= 1; ++place) {
    struct piece_runs runs = piece_runs (start, blk->map.unit_shift,
                                         units & (place ? target : ~target),
                                         from, to);

    while (piece_runs_next (&runs, &at, &next)) {
      CHECK (at < next);
      if (blk_store_write (blk, bytes ? bytes + (at - from) : NULL,
                           next - at, at, place, err) == -1)
        return -1;
    }
  }
  return 0;
}

static inline void
blk_store_punch (struct blk *blk, uint64_t count, uint64_t offset,
                 unsigned place)
{
  lock_stripes (blk, count, offset);
  if (store_punch (blk->store, count, offset, place) == -1)
    nbdkit_debug ("cow: cannot punch a hole in the overlay: %m");
  unlock_stripes (blk, count, offset);
}

static inline void
blk_punch_units (struct blk *blk, uint64_t b, unsigned place, uint32_t units)
  REQUIRES (blk->rmw_locks)
{
  uint64_t start = blockgeom_start (&blk->map.geom, b), at, next;
  struct piece_runs runs = piece_runs (start, blk->map.unit_shift, units,
                                       start,
                                       blockgeom_end (&blk->map.geom, b));

  CHECK (blk_rmw_held (blk, b, 1));
  while (piece_runs_next (&runs, &at, &next))
    blk_store_punch (blk, next - at, at, place);
}

#endif /* COW_BLKSTORE_H */
