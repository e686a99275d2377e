/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The copy-ups: base data into the overlay, for cow-on-read,
 * cow-on-cache and the fill (blk_copy_up, blk_fill, blk_read_copy_up),
 * whole blocks in runs, and the units a partial block lacks.  Each
 * takes the rmw locks of its blocks (blkheld.h) and changes what they
 * hold only after their data is in.
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
#include "iszero.h"
#include "monotonic.h"
#include "pieces.h"
#include "scratch.h"

/* Copy-ups read the base in pieces of this many bytes (or one block,
 * if larger), so that one request costs few base calls.
 */
#define COPY_UP_PIECE (4 * 1024 * 1024)

/* After a read's copy-up found no room, reads copy nothing up for this
 * long: each try on a full filesystem costs a failed write and a
 * message.
 */
#define NO_ROOM_PAUSE_NS UINT64_C (1000000000)

/* Stores blocks [first, first+n), whose base data is in buf, in the
 * overlay.  Blocks that read as zeros only become BLK_ZERO: a copy-up
 * of a sparse image then costs no space and no writes.  The others are
 * written, a run of them with one system call, and become allocated.
 * Requires their states reserved.
 */
static int
store_copy_up (struct blk *blk, const char *buf, uint64_t first, uint64_t n,
               int *err) REQUIRES (blk->rmw_locks)
{
  const struct blockgeom *g = &blk->map.geom;
  uint64_t size = blockgeom_block_size (g), i = 0, j;
  bool zero, next = is_zero (buf, size);

  CHECK (blk_rmw_held (blk, first, n));
  while (i < n) {
    zero = next;
    for (j = i + 1; j < n; ++j) {
      next = is_zero (buf + blockgeom_start (g, j), size);
      if (next != zero)
        break;
    }
    if (!zero &&
        blk_store_write (blk, buf + blockgeom_start (g, i),
                         blockgeom_start (g, j - i),
                         blockgeom_start (g, first + i), 0, err) == -1)
      return -1;
    blk_set_states (blk, first + i, j - i, zero ? BLK_ZERO : BLK_ALLOCATED);
    i = j;
  }
  return 0;
}

/* Copies blocks [first, first+n), all BLK_NOT_ALLOCATED, from the base
 * into the overlay and marks them allocated, counting them in kind.  A
 * copy-up is one the overlay can do without: it takes space only if it
 * leaves the clients' writes their share (space_take_spare), and
 * fails with ENOSPC otherwise.
 */
static int
copy_up_run (struct blk *blk, const struct blk_base *base,
             uint64_t first, uint64_t n, enum counter kind, int *err)
  REQUIRES (blk->rmw_locks)
{
  const struct blockgeom *g = &blk->map.geom;
  uint64_t piece = COPY_UP_PIECE >> g->shift;
  char *buf;
  int r = 0;

  CHECK (blk_rmw_held (blk, first, n));
  CHECK (blkmap_all_in (&blk->map, first, n, BLK_NOT_ALLOCATED));
  if (piece == 0)
    piece = 1;
  if (piece > n)
    piece = n;
  buf = scratch_get (blockgeom_start (g, piece));
  if (buf == NULL) {
    *err = errno;
    nbdkit_error ("cow: malloc: %m");
    return -1;
  }
  while (n > 0 && r == 0) {
    uint64_t c = n < piece ? n : piece;
    uint64_t start = blockgeom_start (g, first);
    uint64_t len = blockgeom_end (g, first + c - 1) - start;
    uint64_t space = blkmap_space (&blk->map, first, c);

    if (!space_take_spare (blk->space, space)) {
      *err = ENOSPC;
      r = -1;
      break;
    }
    if (kind == COPY_UPS_FILL)
      r = blk_base_read_data (blk, base, buf, len, start, err);
    else
      r = blk_base_read (blk, base, buf, len, start, err);
    if (r == 0)
      r = blk_reserve_states (blk, first, c, err);
    if (r == 0)
      r = store_copy_up (blk, buf, first, c, err);
    if (r == 0)
      stat_add (blk, kind, c);
    /* Blocks that stayed out of the overlay or became zero take none. */
    space_give (blk->space,
                space - blkmap_space_held (&blk->map, first, c));
    first += c;
    n -= c;
  }
  scratch_put (buf);
  return r;
}

/* The fill's copy-up of blocks [first, first+n), all
 * BLK_NOT_ALLOCATED: runs the base map knows read as zeros become
 * BLK_ZERO unread (no space, no write); the others are copied up.
 */
static int
fill_run (struct blk *blk, const struct blk_base *base, uint64_t first,
          uint64_t n, int *err) REQUIRES (blk->rmw_locks)
{
  uint64_t b = first, end = first + n, e;
  int r = 0;

  while (b < end && r == 0) {
    bool zero = basemap_reads_zeros (&blk->base_map, base, b);

    for (e = b + 1;
         e < end && basemap_reads_zeros (&blk->base_map, base, e) == zero;
         ++e)
      ;
    if (!zero)
      r = copy_up_run (blk, base, b, e - b, COPY_UPS_FILL, err);
    else if ((r = blk_reserve_states (blk, b, e - b, err)) == 0) {
      blk_set_states (blk, b, e - b, BLK_ZERO);
      stat_add (blk, COPY_UPS_FILL, e - b);
    }
    b = e;
  }
  return r;
}

/* Completes partial block b: copies from the base the runs of
 * units the overlay does not hold, each with one read (nothing it
 * holds is read again), writes them (and only them: the units it
 * holds have writes no copy-up may undo) and marks b allocated,
 * counting it in kind.  Its space was taken at its first write.
 */
static int
complete_partial (struct blk *blk, const struct blk_base *base, uint64_t b,
                  enum counter kind, int *err) REQUIRES (blk->rmw_locks)
{
  const struct blockgeom *g = &blk->map.geom;
  uint64_t start = blockgeom_start (g, b), stop = blockgeom_end (g, b);
  uint64_t at, end;
  struct blkmap_held now, kept;
  struct piece_runs runs;
  uint32_t held, missing, target;
  char *buf;
  int r;

  CHECK (blk_rmw_held (blk, b, 1));
  blkmap_record (&blk->map, b, false, 0, &now, &kept);
  held = now.units;
  missing = blkmap_all_units (&blk->map, b) & ~held;
  target = blk_targets (missing, &now, &kept);
  buf = scratch_get (stop - start);
  if (buf == NULL) {
    *err = errno;
    nbdkit_error ("cow: malloc: %m");
    return -1;
  }
  r = blk_reserve_held (blk, b, err);
  runs = piece_runs (start, blk->map.unit_shift, missing, start, stop);
  while (r == 0 && piece_runs_next (&runs, &at, &end)) {
    r = kind == COPY_UPS_FILL
        ? blk_base_read_data (blk, base, buf, end - at, at, err)
        : blk_base_read (blk, base, buf, end - at, at, err);
    if (r == 0)
      r = blk_store_write_units (blk, b, is_zero (buf, end - at) ? NULL : buf,
                                 at, end,
                                 missing & blkmap_units_of (&blk->map, b, at,
                                                            end),
                                 target, err);
  }
  if (r == 0 && blkmap_has_places (&blk->map))
    blk_set_held (blk, b, held | missing, now.where | target);
  else if (r == 0)
    blk_set_states (blk, b, 1, BLK_ALLOCATED);
  if (r == 0)
    stat_add (blk, kind, 1);
  scratch_put (buf);
  return r;
}

/* Completes the partial blocks [first, stop). */
static int
complete_run (struct blk *blk, const struct blk_base *base, uint64_t first,
              uint64_t stop, enum counter kind, int *err)
  REQUIRES (blk->rmw_locks)
{
  int r = 0;

  for (; first < stop && r == 0; ++first)
    r = complete_partial (blk, base, first, kind, err);
  return r;
}

/* Copies the blocks touching the range that the overlay does not hold
 * whole, counting them in kind (cow-on-read, cow-on-cache or the fill).
 */
static int
copy_up (struct blk *blk, const struct blk_base *base,
         uint32_t count, uint64_t offset, enum counter kind, int *err)
{
  struct rangelock_range held;
  uint64_t first, stop, b;
  int r = 0;

  if (count == 0)
    return 0;
  first = blockgeom_block (&blk->map.geom, offset);
  stop = blockgeom_block (&blk->map.geom, offset + count - 1) + 1;

  /* Nothing to copy, the usual case once data is in: take no lock. */
  for (b = first; b < stop; ) {
    enum blk_state state;
    uint64_t end = blkmap_run (&blk->map, b, stop, &state);
    if (state == BLK_NOT_ALLOCATED || state == BLK_PARTIAL)
      break;
    b = end;
  }
  if (b == stop)
    return 0;

  /* Under the rmw locks the states are stable: look again and copy. */
  blk_lock_rmw (blk, &held, first, stop - first);
  for (b = first; b < stop && r == 0; ) {
    enum blk_state state;
    uint64_t end = blkmap_run (&blk->map, b, stop, &state);
    if (state == BLK_NOT_ALLOCATED && kind == COPY_UPS_FILL)
      r = fill_run (blk, base, b, end - b, err);
    else if (state == BLK_NOT_ALLOCATED)
      r = copy_up_run (blk, base, b, end - b, kind, err);
    else if (state == BLK_PARTIAL)
      r = complete_run (blk, base, b, end, kind, err);
    b = end;
  }
  blk_unlock_rmw (blk, &held);
  return r;
}

int
blk_fill (struct blk *blk, const struct blk_base *base,
          uint32_t count, uint64_t offset, int *err)
{
  return copy_up (blk, base, count, offset, COPY_UPS_FILL, err);
}

int
blk_copy_up (struct blk *blk, const struct blk_base *base,
             uint32_t count, uint64_t offset, int *err)
{
  if (copy_up (blk, base, count, offset, COPY_UPS_CACHE, err) == -1 &&
      !blk_no_room (*err))
    return -1;
  return 0;
}

/* Whether a read may copy up now: not within NO_ROOM_PAUSE_NS of a
 * read's copy-up that found no room.
 */
static bool
reads_copy_up (struct blk *blk)
{
  uint64_t resume = __atomic_load_n (&blk->copy_ups_resume, __ATOMIC_RELAXED);

  return resume == 0 || monotonic_ns () >= resume;
}

int
blk_read_copy_up (struct blk *blk, const struct blk_base *base,
                  uint32_t count, uint64_t offset, enum blk_read_mode mode,
                  int *err)
{
  if (!reads_copy_up (blk))
    return 0;
  if (copy_up (blk, base, count, offset,
               mode == BLK_READ_FILL ? COPY_UPS_FILL : COPY_UPS_READ,
               err) == 0)
    return 0;
  if (!blk_no_room (*err))
    return -1;
  __atomic_store_n (&blk->copy_ups_resume, monotonic_ns () + NO_ROOM_PAUSE_NS,
                    __ATOMIC_RELAXED);
  return 0;
}
