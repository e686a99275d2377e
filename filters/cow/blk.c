/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer's requests: the rules for changing the state of a
 * block, for reads, writes, zeroes, trims and copy-ups.  An overlay's
 * making, sizing and flushing are in blklife.c, its statistics in
 * blkstats.c.
 *
 * docs/design.md holds the state machine, what each lock protects and
 * the lock order, written once; each function here says which locks it
 * expects to hold.  The one rule everything rests on: a block changes
 * state only with its rmw lock held, and BLK_ALLOCATED is final but
 * for a whole-block zero or trim, itself under the lock.  So a write
 * that finds all its blocks allocated goes straight to the overlay
 * with no rmw lock (write_range): no copy-up can be running on
 * them.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "blk.h"
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

/*----------------------------------------------------------------------
 * The layer's locks, their waits counted (lockwaits.h); the base, its
 * reads counted; and the states, in the map and the store.
 */

static void
lock_rmw (struct blk *blk, struct rangelock_range *held,
          uint64_t first, uint64_t n) ACQUIRE (blk->rmw_locks)
{
  lockwaits_add (&blk->waits, BLK_LOCK_RMW,
                 rangelock_lock (&blk->rmw_locks, held, first, n));
}

/* The clients' reads of any base started and ended, for the fill to
 * give way to (atomic, wrapping).
 */
static unsigned client_reads_started, client_reads_ended;

/* Every read of the base goes through here, to be counted. */
static int
base_read (struct blk *blk, const struct blk_base *base, void *buf,
           uint32_t len, uint64_t offset, int *err)
{
  int r;

  stat_add (blk, BASE_READS, 1);
  stat_add (blk, BASE_READ_BYTES, len);
  if (base->background_bytes) {
    *base->background_bytes += len;
    return base->pread (base->opaque, buf, len, offset, err);
  }
  __atomic_add_fetch (&client_reads_started, 1, __ATOMIC_RELAXED);
  r = base->pread (base->opaque, buf, len, offset, err);
  __atomic_add_fetch (&client_reads_ended, 1, __ATOMIC_RELAXED);
  return r;
}

unsigned
blk_client_base_reads (void)
{
  return __atomic_load_n (&client_reads_started, __ATOMIC_RELAXED);
}

bool
blk_client_base_reads_under_way (void)
{
  /* A read that starts or ends between the loads is seen next time. */
  return __atomic_load_n (&client_reads_started, __ATOMIC_RELAXED) !=
    __atomic_load_n (&client_reads_ended, __ATOMIC_RELAXED);
}

/* The runs of the base that read as zeros in a range the fill reads,
 * as far as HOLES_MAX of them, in order, as describe tells them.
 */
#define HOLES_MAX 32
struct holes {
  uint64_t from, to;            /* the range asked about */
  unsigned n;
  uint64_t start[HOLES_MAX], end[HOLES_MAX];
};

/* The blk_found_run of base_read_data: notes the runs of zeros inside
 * the range, joining those that touch.
 */
static void
note_hole (void *opaque, uint64_t offset, uint64_t length, bool zero)
{
  struct holes *h = opaque;
  uint64_t start = offset > h->from ? offset : h->from;
  uint64_t end = offset + length < h->to ? offset + length : h->to;

  if (!zero || start >= end)
    return;
  if (h->n > 0 && h->end[h->n - 1] == start)
    h->end[h->n - 1] = end;
  else if (h->n < HOLES_MAX) {
    h->start[h->n] = start;
    h->end[h->n++] = end;
  }
}

/* As base_read, but the runs the base's extents say read as zeros are
 * zeroed in buf, not read: the fill reads no hole, even inside a
 * block.  A base that cannot tell is read whole.
 */
static int
base_read_data (struct blk *blk, const struct blk_base *base, char *buf,
                uint32_t len, uint64_t offset, int *err)
{
  struct holes h = { .from = offset, .to = offset + len, .n = 0 };
  uint64_t at = offset;
  unsigned i;

  if (base->describe == NULL ||
      base->describe (base->opaque, len, offset, note_hole, &h) == -1)
    h.n = 0;
  for (i = 0; i <= h.n; ++i) {
    uint64_t data_end = i < h.n ? h.start[i] : offset + len;

    if (data_end > at &&
        base_read (blk, base, buf + (at - offset), data_end - at, at,
                   err) == -1)
      return -1;
    if (i == h.n)
      break;
    memset (buf + (h.start[i] - offset), 0, h.end[i] - h.start[i]);
    at = h.end[i];
  }
  return 0;
}

/* Makes room for a change of the states of blocks [first, first+n), in
 * the map and the store, before its I/O, so that set_states cannot
 * fail after the data is written.  Returns 0, or -1 with *err set after
 * nbdkit_error.
 */
static inline int
reserve_states (struct blk *blk, uint64_t first, uint64_t n, int *err)
{
  if (blkmap_reserve (&blk->map, first, n) == 0 &&
      store_reserve_blocks (blk->store, first, n, false) == 0)
    return 0;
  *err = errno;
  nbdkit_error ("cow: cannot grow the block state map: %m");
  return -1;
}

/* Sets blocks [first, first+n) to state, in the map and then in the
 * store.  Requires reserve_states of them.
 */
static inline void
set_states (struct blk *blk, uint64_t first, uint64_t n, enum blk_state state)
  REQUIRES (blk->rmw_locks)
{
  CHECK (blk_rmw_held (blk, first, n));
  blkmap_set (&blk->map, first, n, state);
  store_set_blocks (blk->store, &(struct store_blocks) {
    .first = first, .n = n, .state = state });
}

uint64_t
blk_held_run (struct blk *blk, bool in_view, uint64_t offset, uint64_t end,
              enum blk_state *state, unsigned *place)
{
  const struct blkmap *map = &blk->map;
  uint64_t b = blockgeom_block (&map->geom, offset);
  uint64_t start = blockgeom_start (&map->geom, b);
  uint64_t stop = blockgeom_end (&map->geom, b);
  unsigned i = (offset - start) >> map->unit_shift, j = 32, unused;
  struct blkmap_held held;
  uint32_t run;
  uint64_t run_end;

  CHECK (offset < end && end <= map->geom.size);
  blkmap_get_held (&blk->map, b, in_view, &held);
  if (place == NULL)
    place = &unused;
  *place = 0;
  if (held.units == 0) {
    *state = held.state == BLK_ZERO ? BLK_ZERO : BLK_NOT_ALLOCATED;
    return stop < end ? stop : end;
  }
  if (held.units >> i & 1) {
    *state = BLK_ALLOCATED;
    *place = held.where >> i & 1;
    run = held.units & (*place ? held.where : ~held.where);
  }
  else {
    *state = BLK_NOT_ALLOCATED;
    run = ~held.units;
  }
  bit_run (run, i, &j);
  run_end = start + ((uint64_t) j << map->unit_shift);
  if (run_end > stop)
    run_end = stop;
  return run_end < end ? run_end : end;
}

uint64_t
blk_state_run (struct blk *blk, uint64_t offset, uint64_t end,
               enum blk_state *state)
{
  const struct blockgeom *g = &blk->map.geom;
  uint64_t b = blockgeom_block (g, offset);
  uint64_t stop = blockgeom_block (g, end - 1) + 1;
  uint64_t run_end;

  CHECK (offset < end && end <= g->size);
  run_end = blockgeom_start (g, blkmap_run (&blk->map, b, stop, state));
  if (*state == BLK_PARTIAL)     /* its runs of units */
    return blk_held_run (blk, false, offset, end, state, NULL);
  return run_end < end ? run_end : end;
}

/*----------------------------------------------------------------------
 * Units in places, from the first view on (docs/design.md,
 * "Point-in-time views").
 */

/* Makes room for block b to hold units in part and in places, in the
 * map and the store, before its I/O.  Returns 0, or -1 with *err set
 * after nbdkit_error.
 */
static int
reserve_held (struct blk *blk, uint64_t b, int *err)
{
  if (blkmap_reserve_held (&blk->map, b) == 0 &&
      store_reserve_blocks (blk->store, b, 1,
                            blkmap_holds_parts (&blk->map)) == 0)
    return 0;
  *err = errno;
  nbdkit_error ("cow: cannot grow the block state map: %m");
  return -1;
}

/* Block b holds units (not 0), those of where in place 1: allocated if
 * they are all of its own, else partial; in the map, then in the
 * store.  Requires reserve_held of b.
 */
static void
set_held (struct blk *blk, uint64_t b, uint32_t units, uint32_t where)
  REQUIRES (blk->rmw_locks)
{
  struct store_blocks r = { .first = b, .n = 1, .state = BLK_ALLOCATED };

  CHECK (blk_rmw_held (blk, b, 1));
  blkmap_set_held (&blk->map, b, units, where);
  if (units != blkmap_all_units (&blk->map, b)) {
    r.state = BLK_PARTIAL;
    r.units = units;
  }
  store_set_blocks (blk->store, &r);
}

/* The places units of a block go to when written (bit set: place 1),
 * the block holding now and the view keeping kept: a unit the view
 * keeps to its other place, one the block holds where it is, a new
 * one to place 0.
 */
static uint32_t
targets (uint32_t units, const struct blkmap_held *now,
         const struct blkmap_held *kept)
{
  return (units & kept->units & ~kept->where) |
         (units & ~kept->units & now->units & now->where);
}

/* The units of those a write of the block changes in place: it holds
 * them in the place they are written to.
 */
static uint32_t
in_place (uint32_t units, uint32_t target, const struct blkmap_held *now)
{
  return units & now->units & ~(now->where ^ target);
}

/*----------------------------------------------------------------------
 * Copy-up: base data into the overlay.
 */

/* Whether err says a copy into the overlay found no room: the space
 * cap's share of copies spent, the overlay's filesystem full, or its
 * file at its largest.
 */
static bool
no_room (int err)
{
  return err == ENOSPC || err == EDQUOT || err == EFBIG;
}

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
    set_states (blk, first + i, j - i, zero ? BLK_ZERO : BLK_ALLOCATED);
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
      r = base_read_data (blk, base, buf, len, start, err);
    else
      r = base_read (blk, base, buf, len, start, err);
    if (r == 0)
      r = reserve_states (blk, first, c, err);
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
    else if ((r = reserve_states (blk, b, e - b, err)) == 0) {
      set_states (blk, b, e - b, BLK_ZERO);
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
  target = targets (missing, &now, &kept);
  buf = scratch_get (stop - start);
  if (buf == NULL) {
    *err = errno;
    nbdkit_error ("cow: malloc: %m");
    return -1;
  }
  r = reserve_held (blk, b, err);
  runs = piece_runs (start, blk->map.unit_shift, missing, start, stop);
  while (r == 0 && piece_runs_next (&runs, &at, &end)) {
    r = kind == COPY_UPS_FILL
        ? base_read_data (blk, base, buf, end - at, at, err)
        : base_read (blk, base, buf, end - at, at, err);
    if (r == 0)
      r = blk_store_write_units (blk, b, is_zero (buf, end - at) ? NULL : buf,
                                 at, end,
                                 missing & blkmap_units_of (&blk->map, b, at,
                                                            end),
                                 target, err);
  }
  if (r == 0 && blkmap_has_places (&blk->map))
    set_held (blk, b, held | missing, now.where | target);
  else if (r == 0)
    set_states (blk, b, 1, BLK_ALLOCATED);
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
  lock_rmw (blk, &held, first, stop - first);
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
  rangelock_unlock (&blk->rmw_locks, &held);
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
      !no_room (*err))
    return -1;
  return 0;
}

/*----------------------------------------------------------------------
 * Reads.
 */

/* Whether a read may copy up now: not within NO_ROOM_PAUSE_NS of a
 * read's copy-up that found no room.
 */
static bool
reads_copy_up (struct blk *blk)
{
  uint64_t resume = __atomic_load_n (&blk->copy_ups_resume, __ATOMIC_RELAXED);

  return resume == 0 || monotonic_ns () >= resume;
}

/* A read's copy-up of the range: one that finds no room is given up,
 * and the blocks it did not copy read from the base, since a read
 * never needs the overlay.  Returns 0, or -1 with *err set.
 */
static int
read_copy_up (struct blk *blk, const struct blk_base *base,
              uint32_t count, uint64_t offset, enum blk_read_mode mode,
              int *err)
{
  if (!reads_copy_up (blk))
    return 0;
  if (copy_up (blk, base, count, offset,
               mode == BLK_READ_FILL ? COPY_UPS_FILL : COPY_UPS_READ,
               err) == 0)
    return 0;
  if (!no_room (*err))
    return -1;
  __atomic_store_n (&blk->copy_ups_resume, monotonic_ns () + NO_ROOM_PAUSE_NS,
                    __ATOMIC_RELAXED);
  return 0;
}

int
blk_read_held (struct blk *blk, const struct blk_base *base, bool in_view,
               void *buf, uint32_t count, uint64_t offset, int *err)
{
  bool places = in_view || blkmap_has_places (&blk->map);
  uint64_t end = offset + count;
  char *p = buf;

  while (offset < end) {
    enum blk_state state;
    unsigned place = 0;
    uint64_t run_end;
    uint32_t n;
    int r = 0;

    run_end = places
              ? blk_held_run (blk, in_view, offset, end, &state, &place)
              : blk_state_run (blk, offset, end, &state);
    n = run_end - offset;
    if (state == BLK_ALLOCATED)
      r = store_read (blk->store, p, n, offset, place, err);
    else if (state == BLK_ZERO)
      memset (p, 0, n);
    else if (state == BLK_NOT_ALLOCATED)
      /* Exactly the bytes asked for: no whole-block bounce. */
      r = base_read (blk, base, p, n, offset, err);
    if (r == -1)
      return -1;
    p += n;
    offset = run_end;
  }
  return 0;
}

int
blk_read (struct blk *blk, const struct blk_base *base,
          void *buf, uint32_t count, uint64_t offset,
          enum blk_read_mode mode, int *err)
{
  /* After a copy-up every block of the range is allocated or zero, and
   * stays so: blk_read_held then reads only the overlay.  A copy-up
   * given up for want of room leaves blocks to read from the base.
   */
  if (mode != BLK_READ_ONLY &&
      read_copy_up (blk, base, count, offset, mode, err) == -1)
    return -1;
  return blk_read_held (blk, base, false, buf, count, offset, err);
}

/*----------------------------------------------------------------------
 * Writes: the blocks of a write, the read-modify-write of a partial
 * block, the rmw path and the fast path.
 */

/* The part [from, to) of block b that the range [offset, end) covers. */
static void
block_part (const struct blk *blk, uint64_t b, uint64_t offset, uint64_t end,
            uint64_t *from, uint64_t *to)
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
static bool
reads_zeros_outside (struct blk *blk, const struct blk_base *base,
                     enum blk_state state, uint64_t b)
  REQUIRES (blk->rmw_locks)
{
  CHECK (blk_rmw_held (blk, b, 1));
  return state == BLK_ZERO ||
         (state == BLK_NOT_ALLOCATED &&
          basemap_reads_zeros (&blk->base_map, base, b));
}

/* Builds in data the new content of partial block b: its current
 * content (base or zeros) with the bytes of [offset, end) from buf
 * (zeros if buf is NULL) on top.  Sets *zero_rest if the current
 * content is all zeros.  A block over a part of the base that is known
 * to read as zeros (a hole of a sparse image) is not read at all: the
 * first write into each such block would otherwise fetch a whole block
 * of zeros, up to 1M of them, only to find they are zeros.  Nor are
 * zeros written into data for it: with *zero_rest, write_block reads
 * only the bytes of [offset, end).  state is b's state, never
 * BLK_ALLOCATED.
 */
static int
rmw_fill (struct blk *blk, const struct blk_base *base, enum blk_state state,
          uint64_t b, const char *buf, uint64_t offset, uint64_t end,
          char *data, bool *zero_rest, int *err) REQUIRES (blk->rmw_locks)
{
  uint64_t start = blockgeom_start (&blk->map.geom, b);
  uint64_t len = blockgeom_end (&blk->map.geom, b) - start;
  uint64_t from, to;

  CHECK (state != BLK_ALLOCATED);
  block_part (blk, b, offset, end, &from, &to);
  if (!reads_zeros_outside (blk, base, state, b)) {
    if (base_read (blk, base, data, len, start, err) == -1)
      return -1;
    stat_add (blk, COPY_UPS_RMW, 1);
    *zero_rest = is_zero (data, len);
  }
  else
    *zero_rest = true;
  if (buf != NULL)
    memcpy (data + (from - start), buf + (from - offset), to - from);
  else
    memset (data + (from - start), 0, to - from);
  return 0;
}

static bool
is_partial (const struct blk *blk, uint64_t b, uint64_t offset, uint64_t end)
{
  return offset > blockgeom_start (&blk->map.geom, b) ||
         end < blockgeom_end (&blk->map.geom, b);
}

/* Writes partial block b, whose new content rmw_fill built in data
 * (with zero_rest, only the bytes of [offset, end)), into the
 * overlay.  If the rest of the block is zeros, the block is zeroed in
 * the overlay (a store_write of zeros: FALLOC_FL_ZERO_RANGE, which
 * allocates the space without writing it,
 * where the filesystem has it) and only the bytes of [offset, end) are
 * written, if they are not zeros too: copying 64K of zeros for every
 * 4K write into a fresh block was the largest cost of small random
 * writes (docs/performance.md).
 * The rmw lock of b keeps punches away from it.
 */
static int
write_block (struct blk *blk, uint64_t b, const char *data, bool zero_rest,
             uint64_t offset, uint64_t end, int *err) REQUIRES (blk->rmw_locks)
{
  uint64_t start = blockgeom_start (&blk->map.geom, b);
  uint64_t len = blockgeom_end (&blk->map.geom, b) - start;
  uint64_t from, to;

  CHECK (blk_rmw_held (blk, b, 1));
  if (!zero_rest)
    return blk_store_write (blk, data, len, start, 0, err);
  block_part (blk, b, offset, end, &from, &to);
  return blk_store_write_over_zeros (blk, start, len,
                                     is_zero (data + (from - start), to - from)
                                     ? NULL : data + (from - start),
                                     from, to, err);
}

/* Writes [from, to) of buf (whose byte 0 is at offset; zeros if NULL),
 * whole blocks some of which the overlay holds, into the overlay: first
 * the runs of blocks not yet allocated, then those allocated, so that
 * a write that finds no room (the overlay's filesystem full) fails
 * before it changes a block the overlay holds.  The rmw locks of the
 * range keep its states stable.
 */
static int
write_new_first (struct blk *blk, const char *buf, uint64_t offset,
                 uint64_t from, uint64_t to, int *err)
  REQUIRES (blk->rmw_locks)
{
  enum blk_state state;
  uint64_t at, run_end;
  int allocated;

  for (allocated = 0; allocated <= 1; ++allocated)
    for (at = from; at < to; at = run_end) {
      run_end = blk_state_run (blk, at, to, &state);
      if ((state == BLK_ALLOCATED) == allocated &&
          blk_store_write (blk, buf ? buf + (at - offset) : NULL,
                           run_end - at, at, 0, err) == -1)
        return -1;
    }
  return 0;
}

/* How write_locked writes a block at an end of its range that the
 * range covers in part and the overlay does not hold whole.
 */
enum end_way {
  END_HELD,                     /* it does, or the range covers it */
  END_WHOLE,                    /* written whole, merged with what it read */
  END_UNITS,                    /* only the units the range touches */
};
struct end_write {
  enum end_way way;
  /* END_WHOLE: the block's new content in data; with zero_rest, the
   * block reads as zeros outside the range, and data holds only the
   * range's bytes, at their place in the block.
   */
  bool zero_rest;
  char *data;
  /* END_UNITS: [from, to) is written with bytes (zeros if NULL): the
   * range's, or data, which merges them with the base's bytes of the
   * units the range touches in part and the overlay lacks.  held: the
   * units held before the write, units: after.
   */
  uint64_t from, to;
  const char *bytes;
  uint32_t held, units;
};

/* Plans an END_UNITS write of the part of [offset, end) in block b,
 * which holds units held: reads from the base the rest of
 * each unit the range touches in part that the overlay does not
 * hold, into data (a block's room), with one read if the range lies
 * inside one unit.  Nothing else is read: the units the
 * range covers are the client's, the others stay where they are.
 */
static int
plan_units (struct blk *blk, const struct blk_base *base, uint32_t held,
           uint64_t b, const char *buf, uint64_t offset, uint64_t end,
           struct end_write *e, int *err)
  REQUIRES (blk->rmw_locks)
{
  const struct blkmap *map = &blk->map;
  uint64_t start = blockgeom_start (&map->geom, b);
  uint64_t stop = blockgeom_end (&map->geom, b);
  uint64_t from, to, head, tail;
  bool read_head, read_tail;
  int r = 0;

  block_part (blk, b, offset, end, &from, &to);
  head = piece_floor (start, map->unit_shift, from);
  tail = piece_ceil (start, stop, map->unit_shift, to);
  read_head = from > head && !(held & blkmap_units_of (map, b, from, from + 1));
  read_tail = to < tail && !(held & blkmap_units_of (map, b, to - 1, to));
  e->way = END_UNITS;
  e->from = read_head ? head : from;
  e->to = read_tail ? tail : to;
  e->held = held;
  e->units = held | blkmap_units_of (map, b, from, to);
  e->bytes = buf ? buf + (from - offset) : NULL;
  if (!read_head && !read_tail)
    return 0;
  if (read_head && read_tail &&
      tail - head <= (UINT64_C (1) << map->unit_shift))
    r = base_read (blk, base, e->data, tail - head, head, err);
  else {
    if (read_head)
      r = base_read (blk, base, e->data, from - head, head, err);
    if (r == 0 && read_tail)
      r = base_read (blk, base, e->data + (to - e->from), tail - to, to, err);
  }
  if (r == -1)
    return -1;
  stat_add (blk, COPY_UPS_RMW, 1);
  if (buf != NULL)
    memcpy (e->data + (from - e->from), buf + (from - offset), to - from);
  else
    memset (e->data + (from - e->from), 0, to - from);
  e->bytes = e->data;
  return 0;
}

/* Plans the write of block b at an end of [offset, end), e->data being
 * a block's room: END_UNITS into a block the overlay holds in part, or
 * that it lacks over base data, where the overlay holds partial
 * blocks; else END_WHOLE, read-modify-written (rmw_fill); END_HELD if
 * the range covers b or the overlay holds it whole.
 */
static int
plan_end (struct blk *blk, const struct blk_base *base, uint64_t b,
          const char *buf, uint64_t offset, uint64_t end,
          struct end_write *e, int *err) REQUIRES (blk->rmw_locks)
{
  struct blkmap_held now;

  e->way = END_HELD;
  if (!is_partial (blk, b, offset, end))
    return 0;
  blkmap_get_held (&blk->map, b, false, &now);
  if (now.state == BLK_ALLOCATED)
    return 0;
  if (blkmap_holds_parts (&blk->map) &&
      (now.state == BLK_PARTIAL ||
       !reads_zeros_outside (blk, base, now.state, b)))
    return plan_units (blk, base, now.units, b, buf, offset, end, e, err);
  e->way = END_WHOLE;
  return rmw_fill (blk, base, now.state, b, buf, offset, end, e->data,
                   &e->zero_rest, err);
}

/* Makes room for block b to become partial at an END_UNITS end.
 * Returns 0, or -1 with *err set after nbdkit_error.
 */
static int
reserve_end (struct blk *blk, uint64_t b, const struct end_write *e, int *err)
{
  return e->way == END_UNITS ? reserve_held (blk, b, err) : 0;
}

/* Writes an END_UNITS end, block b: first the runs of units it did
 * not hold, then those it held, so that a write that finds no room
 * (only the units written take space in the store) fails before it
 * changes a byte a read sees.  A block new to the overlay is one run,
 * one pwrite.
 */
static int
write_units (struct blk *blk, uint64_t b, const struct end_write *e, int *err)
  REQUIRES (blk->rmw_locks)
{
  uint32_t range = blkmap_units_of (&blk->map, b, e->from, e->to);

  /* All in place 0: the block layer writes by ends only before the
   * first view.
   */
  if (blk_store_write_units (blk, b, e->bytes, e->from, e->to,
                             ~e->held & range, 0, err) == -1)
    return -1;
  return blk_store_write_units (blk, b, e->bytes, e->from, e->to,
                                e->held & range, 0, err);
}

/* Writes block b at an end of [offset, end) as planned. */
static int
write_end (struct blk *blk, uint64_t b, const struct end_write *e,
           uint64_t offset, uint64_t end, int *err) REQUIRES (blk->rmw_locks)
{
  switch (e->way) {
  case END_HELD:
    return 0;
  case END_WHOLE:
    return write_block (blk, b, e->data, e->zero_rest, offset, end, err);
  case END_UNITS:
    break;
  }
  return write_units (blk, b, e, err);
}

/*----------------------------------------------------------------------
 * Writes by units in places.
 */

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
  if (reads_zeros_outside (blk, base, now->state, b)) {
    memset (buf, 0, len);
    return 0;
  }
  stat_add (blk, COPY_UPS_RMW, 1);
  return base_read (blk, base, buf, len, at, err);
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

  block_part (blk, b, offset, end, &from, &to);
  /* A zeroed block is written whole: the units it would not hold would
   * read the base.
   */
  units = now->state == BLK_ZERO ? blkmap_all_units (&blk->map, b)
                                 : blkmap_units_of (&blk->map, b, from, to);
  target = targets (units, now, kept);
  ready = in_place (units, target, now);
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
        current_bytes (blk, base, now, b, data, from - ufrom, ufrom, err) == -1)
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
  set_held (blk, b, now->units | units, (now->where & ~units) | target);
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

/* Writes block b's part of [offset, end) as write_placed does: if the
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

  block_part (blk, b, offset, end, &from, &to);
  for (tries = 0; tries < 2; ++tries) {
    bytes = record_change (blk, b, blkmap_units_of (&blk->map, b, from, to),
                           &now, &kept);
    if (write_placed_block (blk, base, buf, offset, end, b, &now, &kept,
                            data, err) == 0)
      return 0;
    blk_view_unkeep (blk, bytes);
    if (!no_room (*err) || kept.units == 0 || !blk_view_break_in_place (blk))
      return -1;
  }
  return -1;
}

/* write_locked from the first view on: each block of [first, last]
 * written by units in places (write_placed_block).
 */
static int
write_placed (struct blk *blk, const struct blk_base *base, const char *buf,
              uint64_t offset, uint64_t end, uint64_t first, uint64_t last,
              int *err) REQUIRES (blk->rmw_locks)
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
    r = reserve_held (blk, b, err);
    if (r == 0)
      r = write_placed_or_break (blk, base, buf, offset, end, b, data, err);
  }
  scratch_put (data);
  return r;
}

/* space_take for a client's change: if there is no room while the view
 * keeps bytes, the view breaks and gives them back, and the change
 * takes them (a client's write never fails for a view).
 */
static int
take_space (struct blk *blk, uint64_t *hold, uint64_t bytes, int *err)
{
  if (space_try_take (blk->space, hold, bytes) ||
      (blk_view_break_if_keeping (blk) &&
       space_try_take (blk->space, hold, bytes)))
    return 0;
  return space_refuse (blk->space, err);
}

/* write_locked before the first view: the ends planned (plan_end), the
 * bytes written (those of new blocks first), then the states changed;
 * space, the bytes the blocks not held yet take, already taken.
 */
static int
write_planned (struct blk *blk, const struct blk_base *base, const char *buf,
               uint64_t offset, uint64_t end, uint64_t first, uint64_t last,
               uint64_t space, int *err) REQUIRES (blk->rmw_locks)
{
  struct end_write head, tail;
  uint64_t block_size = blockgeom_block_size (&blk->map.geom);
  uint64_t from = offset, to = end, n = last - first + 1, lo, hi;
  char *data = scratch_get (2 * block_size);  /* each end's partial block */
  int r = -1;

  if (data == NULL) {
    *err = errno;
    nbdkit_error ("cow: malloc: %m");
    return -1;
  }
  head.data = data;
  tail.data = data + block_size;
  tail.way = END_HELD;
  if (plan_end (blk, base, first, buf, offset, end, &head, err) == -1 ||
      (last != first &&
       plan_end (blk, base, last, buf, offset, end, &tail, err) == -1))
    goto out;
  if (head.way != END_HELD)
    from = blockgeom_end (&blk->map.geom, first);
  if (tail.way != END_HELD)
    to = blockgeom_start (&blk->map.geom, last);
  if (reserve_states (blk, first, n, err) == -1 ||
      reserve_end (blk, first, &head, err) == -1 ||
      reserve_end (blk, last, &tail, err) == -1)
    goto out;

  /* The partial blocks at the ends are new to the overlay, or held in
   * part, their space taken whole.
   */
  if (write_end (blk, first, &head, offset, end, err) == -1 ||
      write_end (blk, last, &tail, offset, end, err) == -1)
    goto out;
  if (from < to &&
      (space == blkmap_space (&blk->map, first, n)
       ? blk_store_write (blk, buf ? buf + (from - offset) : NULL,
                          to - from, from, 0, err)  /* none held: all new */
       : write_new_first (blk, buf, offset, from, to, err)) == -1)
    goto out;

  lo = first + (head.way == END_UNITS);
  hi = last + 1 - (tail.way == END_UNITS);
  if (lo < hi)
    set_states (blk, lo, hi - lo, BLK_ALLOCATED);
  if (head.way == END_UNITS)
    set_held (blk, first, head.units, 0);
  if (tail.way == END_UNITS)
    set_held (blk, last, tail.units, 0);
  r = 0;
 out:
  scratch_put (data);
  return r;
}

/* Writes [offset, end) of buf (zeros if NULL) into blocks [first, last]
 * and marks them allocated, but an end block written by units
 * (plan_end), which becomes partial, or allocated once it holds them
 * all.  The rmw locks of [first, last] keep all their states stable
 * here.  The space of the blocks the overlay does not hold yet is
 * taken first (from *hold, if not NULL, then from the budget), then
 * come base reads, overlay writes (those of new blocks first) and the
 * state change: a failure at any step changes no state and gives the
 * space back, and one that finds no room changes no byte a read sees.
 */
static int
write_locked (struct blk *blk, const struct blk_base *base, const char *buf,
              uint64_t offset, uint64_t end, uint64_t first, uint64_t last,
              uint64_t *hold, int *err) REQUIRES (blk->rmw_locks)
{
  uint64_t n = last - first + 1;
  uint64_t space = blkmap_space_to_allocate (&blk->map, first, n);
  int r;

  CHECK (blk_rmw_held (blk, first, n));
  if (take_space (blk, hold, space, err) == -1)
    return -1;
  if (blkmap_has_places (&blk->map)) {
    /* The blocks written before one failed keep their space. */
    r = write_placed (blk, base, buf, offset, end, first, last, err);
    if (r == -1)
      space_give (blk->space, blkmap_space_to_allocate (&blk->map, first, n));
    return r;
  }
  r = write_planned (blk, base, buf, offset, end, first, last, space, err);
  if (r == -1)
    space_give (blk->space, space);
  return r;
}

/* Whether the rmw path may make the block of a write inside block
 * first allocated as zeros and leave the write's bytes to the fast
 * path (write_rmw): when the block reads as zeros outside the overlay.
 * state is first's.  Holds first's rmw lock.
 */
static bool
allocates_as_zeros (struct blk *blk, const struct blk_base *base,
                    const char *buf, uint64_t offset, uint64_t end,
                    uint64_t first, uint64_t last, enum blk_state state)
  REQUIRES (blk->rmw_locks)
{
  return first == last && buf != NULL &&
         is_partial (blk, first, offset, end) &&
         reads_zeros_outside (blk, base, state, first);
}

/* The rmw path of blk_write, for a write into blocks [first, last]
 * that the overlay did not hold: takes their rmw locks and writes.
 * With may_defer it may instead leave the bytes to the fast path,
 * setting *deferred, so that the writes queued behind this one for the
 * same block wait for its change of state and not for its bytes as
 * well:
 * - when a write that went first made the overlay hold the range
 *   while this one waited for the locks: the bytes need no rmw lock
 *   any more;
 * - when the write is a part of one block that reads as zeros outside
 *   the overlay (a block's first write, into a hole of the base or a
 *   zeroed block): the block is allocated as zeros (a whole-block zero,
 *   which changes nothing a read sees), and its space taken, first.
 * Requires no lock.
 */
static int
write_rmw (struct blk *blk, const struct blk_base *base, const char *buf,
           uint64_t offset, uint64_t end, uint64_t first, uint64_t last,
           bool may_defer, bool *deferred, int *err)
{
  struct rangelock_range held;
  unsigned place;
  int r = 0;

  lock_rmw (blk, &held, first, last - first + 1);
  *deferred = may_defer &&
              blkmap_holds (&blk->map, first, last, offset, end, &place);
  if (!*deferred && may_defer &&
      allocates_as_zeros (blk, base, buf, offset, end, first, last,
                          blkmap_get (&blk->map, first))) {
    r = write_locked (blk, base, NULL, blockgeom_start (&blk->map.geom, first),
                      blockgeom_end (&blk->map.geom, first), first, first,
                      NULL, err);
    *deferred = true;
  }
  else if (!*deferred)
    r = write_locked (blk, base, buf, offset, end, first, last, NULL, err);
  rangelock_unlock (&blk->rmw_locks, &held);
  return r;
}

/* Writes [offset, end) into blocks [first, last]: the fast path, else
 * the rmw path.  The fast path (blk_store_write_if_held): if the blocks
 * hold every byte of the write, no copy-up can be running on any of
 * them (see the top of this file), so the bytes go straight to the
 * overlay, with no rmw lock; the state lookup and the write hold the
 * write locks of the range together, as every punch does (discard): a
 * block that a zero or trim racing this write discards is either
 * punched after the write or seen in its new state there, never
 * written after its punch, where the bytes would hold space no state
 * accounts for.  A write goes the rmw path at most twice (write_rmw
 * defers only the first time), so a block trimmed again and again
 * under it cannot keep it looping.
 */
static int
write_range (struct blk *blk, const struct blk_base *base, const void *buf,
             uint64_t offset, uint64_t end, uint64_t first, uint64_t last,
             int *err)
{
  bool done, deferred, may_defer = true;
  int r;

  for (;;) {
    r = blk_store_write_if_held (blk, buf, end - offset, offset, &done, err);
    if (done)
      return r;
    r = write_rmw (blk, base, buf, offset, end, first, last, may_defer,
                   &deferred, err);
    if (r == -1 || !deferred)
      return r;
    may_defer = false;
  }
}

/* Marks blocks [first, first+n) changed (changes.h), telling the
 * store, and ends the change that store_change_begin began.
 */
static void
end_change (struct blk *blk, uint64_t first, uint64_t n)
{
  if (changes_mark (&blk->changes, first, n))
    store_note_marks (blk->store, first, n);
  store_change_end (blk->store);
}

/* A write of blk_write, once.  The blocks are marked changed even if
 * it failed: it may have changed some of their bytes, and a mark too
 * many only reports a block as it reads.
 */
static int
write_once (struct blk *blk, const struct blk_base *base, const void *buf,
            uint32_t count, uint64_t offset, int *err)
{
  uint64_t end = offset + count, first, last;
  int r;

  first = blockgeom_block (&blk->map.geom, offset);
  last = blockgeom_block (&blk->map.geom, end - 1);
  gate_enter (&blk->gate);
  if (store_change_begin (blk->store, err) == -1) {
    gate_leave (&blk->gate);
    return -1;
  }
  r = write_range (blk, base, buf, offset, end, first, last, err);
  end_change (blk, first, last - first + 1);
  gate_leave (&blk->gate);
  return r;
}

/*----------------------------------------------------------------------
 * Zero and trim.
 */

/* discard_locked from the first view on: both places punched; while
 * the view lives, block by block, its record made first, and the units
 * it keeps left where they are.
 */
static int
discard_placed (struct blk *blk, uint64_t first, uint64_t n, int *err)
  REQUIRES (blk->rmw_locks)
{
  uint64_t start = blockgeom_start (&blk->map.geom, first);
  uint64_t len = blockgeom_end (&blk->map.geom, first + n - 1) - start, b;

  if (blk_view_state_of (blk) != BLK_VIEW_LIVE) {
    uint64_t freed = blkmap_space_held (&blk->map, first, n);
    unsigned place;

    set_states (blk, first, n, BLK_ZERO);
    space_give (blk->space, freed);
    for (place = 0; place <= 1; ++place)
      blk_store_punch (blk, len, start, place);
    return 0;
  }
  for (b = first; b < first + n; ++b)
    if (reserve_held (blk, b, err) == -1)
      return -1;
  for (b = first; b < first + n; ++b) {
    uint32_t all = blkmap_all_units (&blk->map, b);
    uint64_t freed = blkmap_space_held (&blk->map, b, 1);
    struct blkmap_held now, kept;

    record_change (blk, b, all, &now, &kept);
    set_states (blk, b, 1, BLK_ZERO);
    space_give (blk->space, freed);
    blk_punch_units (blk, b, 0, all & ~(kept.units & ~kept.where));
    blk_punch_units (blk, b, 1, all & ~(kept.units & kept.where));
  }
  return 0;
}

/* Marks blocks [first, first+n) BLK_ZERO, gives their space back and
 * punches them out of the overlay, under the write locks of the range.
 * The state change comes first: from then on reads return zeros
 * whatever the overlay holds, so a filesystem that cannot punch holes
 * costs space, never correctness.
 */
static int
discard_locked (struct blk *blk, uint64_t first, uint64_t n, int *err)
  REQUIRES (blk->rmw_locks)
{
  uint64_t start = blockgeom_start (&blk->map.geom, first);
  uint64_t len = blockgeom_end (&blk->map.geom, first + n - 1) - start, freed;

  if (reserve_states (blk, first, n, err) == -1)
    return -1;
  if (blkmap_has_places (&blk->map))
    return discard_placed (blk, first, n, err);
  freed = blkmap_space_held (&blk->map, first, n);
  set_states (blk, first, n, BLK_ZERO);
  space_give (blk->space, freed);
  blk_store_punch (blk, len, start, 0);
  return 0;
}

/* Writes zeros over the parts of [offset, end) in its first and last
 * blocks that do not cover their block.  A block that reads as zeros
 * without being in the overlay is left as it is: zeroing part of it
 * changes nothing, and writing it would take a block of space for
 * zeros.  The space the others need is taken first, so that a zero
 * refused for space changes nothing.  The rmw locks of both blocks
 * keep their states, and so the space they need, stable.
 */
static int
zero_ends_locked (struct blk *blk, const struct blk_base *base,
                  uint64_t offset, uint64_t end, int *err)
  REQUIRES (blk->rmw_locks)
{
  uint64_t ends[2] = { blockgeom_block (&blk->map.geom, offset),
                       blockgeom_block (&blk->map.geom, end - 1) };
  size_t n = ends[0] == ends[1] ? 1 : 2, i;
  bool to_write[2] = { false, false };
  uint64_t hold = 0, from, to;
  int r = 0;

  CHECK (blk_rmw_held (blk, ends[0], ends[n - 1] - ends[0] + 1));
  for (i = 0; i < n; i++) {
    to_write[i] = is_partial (blk, ends[i], offset, end) &&
                  !reads_zeros_outside (blk, base,
                                        blkmap_get (&blk->map, ends[i]),
                                        ends[i]);
    if (to_write[i])
      hold += blkmap_space_to_allocate (&blk->map, ends[i], 1);
  }
  if (take_space (blk, NULL, hold, err) == -1)
    return -1;
  for (i = 0; i < n && r == 0; i++) {
    if (!to_write[i])
      continue;
    block_part (blk, ends[i], offset, end, &from, &to);
    r = write_locked (blk, base, NULL, from, to, ends[i], ends[i], &hold,
                      err);
  }
  space_give (blk->space, hold);
  return r;
}

/* Whole blocks of the range become BLK_ZERO; the partial ends are
 * written as zeros if zero_ends, else left alone (a trim).  All under
 * the rmw locks of every block touched, which are then marked changed,
 * as blk_write marks its blocks.
 */
static int
discard_once (struct blk *blk, const struct blk_base *base,
              uint32_t count, uint64_t offset, bool zero_ends, int *err)
{
  struct rangelock_range held;
  uint64_t end = offset + count, first, stop, lock_from, lock_to;
  int r = 0;

  blockgeom_whole (&blk->map.geom, offset, end, &first, &stop);
  if (first >= stop && !zero_ends)
    return 0;

  lock_from = zero_ends ? blockgeom_block (&blk->map.geom, offset) : first;
  lock_to = zero_ends ? blockgeom_block (&blk->map.geom, end - 1) + 1 : stop;
  gate_enter (&blk->gate);
  if (store_change_begin (blk->store, err) == -1) {
    gate_leave (&blk->gate);
    return -1;
  }
  lock_rmw (blk, &held, lock_from, lock_to - lock_from);
  if (zero_ends)
    r = zero_ends_locked (blk, base, offset, end, err);
  if (r == 0 && first < stop)
    r = discard_locked (blk, first, stop - first, err);
  rangelock_unlock (&blk->rmw_locks, &held);
  end_change (blk, lock_from, lock_to - lock_from);
  gate_leave (&blk->gate);
  return r;
}

/*----------------------------------------------------------------------
 * The requests that change the overlay.
 */

/* A client's change: a write (of buf, or zeros if NULL), or a discard
 * (zero_ends: a zero with trim, else a trim).
 */
enum change_kind { CHANGE_WRITE, CHANGE_ZERO_TRIM, CHANGE_TRIM };

static int
change_once (struct blk *blk, enum change_kind kind,
             const struct blk_base *base, const void *buf, uint32_t count,
             uint64_t offset, int *err)
{
  if (kind == CHANGE_WRITE)
    return write_once (blk, base, buf, count, offset, err);
  return discard_once (blk, base, count, offset, kind == CHANGE_ZERO_TRIM,
                       err);
}

/* A change that found no room on the overlay's filesystem while a view
 * kept places there is tried once more after the view gave them back
 * (blk_view_give_room): a client's change never fails for a view.
 */
static int
change (struct blk *blk, enum change_kind kind, const struct blk_base *base,
        const void *buf, uint32_t count, uint64_t offset, int *err)
{
  uint64_t given = blk_view_places_given (blk);
  int r;

  if (count == 0)
    return 0;
  r = change_once (blk, kind, base, buf, count, offset, err);
  if (r == -1 && no_room (*err) && blk_view_give_room (blk, given))
    r = change_once (blk, kind, base, buf, count, offset, err);
  blk_view_settle (blk);
  return r;
}

int
blk_write (struct blk *blk, const struct blk_base *base,
           const void *buf, uint32_t count, uint64_t offset, int *err)
{
  return change (blk, CHANGE_WRITE, base, buf, count, offset, err);
}

int
blk_zero (struct blk *blk, const struct blk_base *base,
          uint32_t count, uint64_t offset, bool may_trim, int *err)
{
  return change (blk, may_trim ? CHANGE_ZERO_TRIM : CHANGE_WRITE, base, NULL,
                 count, offset, err);
}

int
blk_trim (struct blk *blk, uint32_t count, uint64_t offset, int *err)
{
  return change (blk, CHANGE_TRIM, NULL, NULL, count, offset, err);
}
