/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The changes of blocks by units in places, from the first view on
 * (docs/design.md, "Point-in-time views"): a write goes unit by unit
 * to the places blk_targets says, the view's record of each block made
 * first, and a discard punches only the units the view does not keep.
 * Called by the requests (blk.c) under the blocks' rmw locks.
 */

#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "blk.h"
#include "blkheld.h"
#include "blkpriv.h"
#include "blkstore.h"
#include "checks.h"
#include "pieces.h"
#include "scratch.h"

/* The bytes of [at, at+len), inside one unit of block b, as b holds
 * them now (the overlay's place, zeros, or the base), into buf.  Those
 * of the overlay are copied because a view keeps the unit (the write
 * would change them in place otherwise): counted.
 */
static int
current_bytes (struct blk *blk, const struct blk_base *base,
               const struct blkmap_held *now, uint64_t b, char *buf,
               uint64_t len, uint64_t at, int *err) REQUIRES (blk->rmw_locks)
{
  uint64_t start = blockgeom_start (&blk->map.geom, b);
  unsigned i = (at - start) >> blk->map.unit_shift;

  if (now->units >> i & 1) {
    stat_add (blk, VIEW_COPIED_BYTES, len);
    return store_read (blk->store, buf, len, at, now->where >> i & 1, err);
  }
  if (blk_reads_zeros_outside (blk, base, now->state, b)) {
    memset (buf, 0, len);
    return 0;
  }
  stat_add (blk, COPY_UPS_RMW, 1);
  return blk_base_read (blk, base, buf, len, at, err);
}

/* After a failed write of the units of block b that move (or are new)
 * to their places in target: punches them there, where neither the
 * block nor the view holds them, so that what the write got in before
 * it failed (for want of room) holds no space.
 */
static void
punch_moved (struct blk *blk, uint64_t b, uint32_t moved, uint32_t target)
  REQUIRES (blk->rmw_locks)
{
  blk_punch_units (blk, b, 0, moved & ~target);
  blk_punch_units (blk, b, 1, moved & target);
}

/* Writes the part of [offset, end) in block b (buf's byte 0 at offset,
 * zeros if NULL) unit by unit to their places (targets), as b holds
 * now and the view keeps kept, data being a block's room.  A unit the
 * write covers in part and whose bytes are not in its place yet is
 * completed in data from where they are.  Writes that land where no
 * read looks (new units, units moving) come before those in place, so
 * that one that finds no room fails before it changes a byte a read
 * sees.  Sets b's units and places after.
 */
static int
write_placed_block (struct blk *blk, const struct blk_base *base,
                    const char *buf, uint64_t offset, uint64_t end,
                    uint64_t b, const struct blkmap_held *now,
                    const struct blkmap_held *kept, char *data, int *err)
  REQUIRES (blk->rmw_locks)
{
  unsigned shift = blk->map.unit_shift;
  uint64_t start = blockgeom_start (&blk->map.geom, b);
  uint64_t stop = blockgeom_end (&blk->map.geom, b);
  uint64_t from, to, ufrom, uto;
  uint32_t units, target, ready;
  const char *bytes;

  blk_block_part (blk, b, offset, end, &from, &to);
  /* A zeroed block is written whole: the units it would not hold would
   * read the base.
   */
  units = now->state == BLK_ZERO ? blkmap_all_units (&blk->map, b)
                                 : blkmap_units_of (&blk->map, b, from, to);
  target = blk_targets (units, now, kept);
  ready = blk_in_place (units, target, now);
  ufrom = from;
  uto = to;
  if (now->state == BLK_ZERO) {
    ufrom = start;
    uto = stop;
  }
  /* A unit written in part and moved is completed from where it is. */
  if (!(ready & piece_bit (start, shift, ufrom)))
    ufrom = piece_floor (start, shift, ufrom);
  if (!(ready & piece_bit (start, shift, uto - 1)))
    uto = piece_ceil (start, stop, shift, uto);
  bytes = buf ? buf + (from - offset) : NULL;
  if (ufrom < from || uto > to) {
    if (ufrom < from &&
        current_bytes (blk, base, now, b, data, from - ufrom, ufrom,
                       err) == -1)
      return -1;
    if (uto > to &&
        current_bytes (blk, base, now, b, data + (to - ufrom), uto - to, to,
                       err) == -1)
      return -1;
    if (buf)
      memcpy (data + (from - ufrom), buf + (from - offset), to - from);
    else
      memset (data + (from - ufrom), 0, to - from);
    bytes = data;
  }
  if (blk_store_write_units (blk, b, bytes, ufrom, uto, units & ~ready,
                             target, err) == -1) {
    punch_moved (blk, b, units & ~ready, target);
    return -1;
  }
  if (blk_store_write_units (blk, b, bytes, ufrom, uto, units & ready,
                             target, err) == -1)
    return -1;
  blk_set_held (blk, b, now->units | units, (now->where & ~units) | target);
  return 0;
}

/* The bytes of the units of block b that a change of units moves out
 * of the places where the view keeps them and b held them, so that
 * only the view keeps them from then on.
 */
static uint64_t
newly_kept (const struct blk *blk, uint32_t units,
            const struct blkmap_held *now, const struct blkmap_held *kept)
{
  uint32_t shared = kept->units & now->units & ~(now->where ^ kept->where);

  return (uint64_t) __builtin_popcount (units & shared) << blk->map.unit_shift;
}

/* What the view keeps of block b, about to change, and what b holds,
 * the view's record made: if the view cannot have the space for what
 * the change of units makes it keep alone, it breaks and keeps
 * nothing.  Returns the bytes it took for them.
 */
static uint64_t
record_change (struct blk *blk, uint64_t b, uint32_t units,
               struct blkmap_held *now, struct blkmap_held *kept)
  REQUIRES (blk->rmw_locks)
{
  uint64_t bytes;

  blkmap_record (&blk->map, b, true,
                 slotmap_get (changes_marks (&blk->changes), b), now, kept);
  bytes = newly_kept (blk, units, now, kept);
  if (bytes == 0 || blk_view_keep (blk, bytes))
    return bytes;
  blkmap_record (&blk->map, b, false, 0, now, kept);
  return 0;
}

/* Writes block b's part of [offset, end) as blk_write_placed does: if the
 * overlay's filesystem has no room for the units the view keeps to
 * move, the view breaks and the write goes on in place.  The space
 * taken for those units goes back if they did not move.
 */
static int
write_placed_or_break (struct blk *blk, const struct blk_base *base,
                       const char *buf, uint64_t offset, uint64_t end,
                       uint64_t b, char *data, int *err)
  REQUIRES (blk->rmw_locks)
{
  struct blkmap_held now, kept;
  uint64_t from, to, bytes;
  int tries;

  blk_block_part (blk, b, offset, end, &from, &to);
  for (tries = 0; tries < 2; ++tries) {
    bytes = record_change (blk, b, blkmap_units_of (&blk->map, b, from, to),
                           &now, &kept);
    if (write_placed_block (blk, base, buf, offset, end, b, &now, &kept,
                            data, err) == 0)
      return 0;
    blk_view_unkeep (blk, bytes);
    if (!blk_no_room (*err) || kept.units == 0 ||
        !blk_view_break_in_place (blk))
      return -1;
  }
  return -1;
}

int
blk_write_placed (struct blk *blk, const struct blk_base *base,
                  const char *buf, uint64_t offset, uint64_t end,
                  uint64_t first, uint64_t last, int *err)
{
  uint64_t block_size = blockgeom_block_size (&blk->map.geom), b;
  char *data = scratch_get (block_size);
  int r = 0;

  if (data == NULL) {
    *err = errno;
    nbdkit_error ("cow: malloc: %m");
    return -1;
  }
  for (b = first; b <= last && r == 0; ++b) {
    r = blk_reserve_held (blk, b, err);
    if (r == 0)
      r = write_placed_or_break (blk, base, buf, offset, end, b, data, err);
  }
  scratch_put (data);
  return r;
}

int
blk_discard_placed (struct blk *blk, uint64_t first, uint64_t n, int *err)
  REQUIRES (blk->rmw_locks)
{
  uint64_t start = blockgeom_start (&blk->map.geom, first);
  uint64_t len = blockgeom_end (&blk->map.geom, first + n - 1) - start, b;

  if (blk_view_state_of (blk) != BLK_VIEW_LIVE) {
    uint64_t freed = blkmap_space_held (&blk->map, first, n);
    unsigned place;

    blk_set_states (blk, first, n, BLK_ZERO);
    space_give (blk->space, freed);
    for (place = 0; place <= 1; ++place)
      blk_store_punch (blk, len, start, place);
    return 0;
  }
  for (b = first; b < first + n; ++b)
    if (blk_reserve_held (blk, b, err) == -1)
      return -1;
  for (b = first; b < first + n; ++b) {
    uint32_t all = blkmap_all_units (&blk->map, b);
    uint64_t freed = blkmap_space_held (&blk->map, b, 1);
    struct blkmap_held now, kept;

    record_change (blk, b, all, &now, &kept);
    blk_set_states (blk, b, 1, BLK_ZERO);
    space_give (blk->space, freed);
    blk_punch_units (blk, b, 0, all & ~(kept.units & ~kept.where));
    blk_punch_units (blk, b, 1, all & ~(kept.units & kept.where));
  }
  return 0;
}
