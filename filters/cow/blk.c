/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer's requests: reads, writes, zeroes and trims, and the
 * rules by which they change what a block holds.  The copy-ups are in
 * blkcopy.c, the changes by units in places (from the first view on)
 * in blkplaced.c, the locks and records they change in blkheld.h, an
 * overlay's making, sizing and flushing in blklife.c, its statistics
 * in blkstats.c.
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
#include "blkheld.h"
#include "blkpriv.h"
#include "blkstore.h"
#include "checks.h"
#include "iszero.h"
#include "monotonic.h"
#include "pieces.h"
#include "scratch.h"

/*----------------------------------------------------------------------
 * The runs of bytes that read alike, and reads.
 */

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
      r = blk_base_read (blk, base, p, n, offset, err);
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
      blk_read_copy_up (blk, base, count, offset, mode, err) == -1)
    return -1;
  return blk_read_held (blk, base, false, buf, count, offset, err);
}

/*----------------------------------------------------------------------
 * Writes: the blocks of a write, the read-modify-write of a partial
 * block, the rmw path and the fast path.
 */

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
  blk_block_part (blk, b, offset, end, &from, &to);
  if (!blk_reads_zeros_outside (blk, base, state, b)) {
    if (blk_base_read (blk, base, data, len, start, err) == -1)
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
  blk_block_part (blk, b, offset, end, &from, &to);
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

  blk_block_part (blk, b, offset, end, &from, &to);
  head = piece_floor (start, map->unit_shift, from);
  tail = piece_ceil (start, stop, map->unit_shift, to);
  read_head = from > head &&
              !(held & blkmap_units_of (map, b, from, from + 1));
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
    r = blk_base_read (blk, base, e->data, tail - head, head, err);
  else {
    if (read_head)
      r = blk_base_read (blk, base, e->data, from - head, head, err);
    if (r == 0 && read_tail)
      r = blk_base_read (blk, base, e->data + (to - e->from), tail - to, to,
                         err);
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
       !blk_reads_zeros_outside (blk, base, now.state, b)))
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
  return e->way == END_UNITS ? blk_reserve_held (blk, b, err) : 0;
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
  if (blk_reserve_states (blk, first, n, err) == -1 ||
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
    blk_set_states (blk, lo, hi - lo, BLK_ALLOCATED);
  if (head.way == END_UNITS)
    blk_set_held (blk, first, head.units, 0);
  if (tail.way == END_UNITS)
    blk_set_held (blk, last, tail.units, 0);
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
    r = blk_write_placed (blk, base, buf, offset, end, first, last, err);
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
         blk_reads_zeros_outside (blk, base, state, first);
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

  blk_lock_rmw (blk, &held, first, last - first + 1);
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
  blk_unlock_rmw (blk, &held);
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

/* Whether a change of blocks [first, first+n) may raise the mark of a
 * block the overlay holds, whose bytes it may change in place.  Read
 * after store_change_begin, so that a checkpoint made since finds the
 * change in flight.
 */
static bool
changes_held_unmarked (struct blk *blk, uint64_t first, uint64_t n)
{
  uint64_t b = first, end = first + n, stop;
  enum blk_state state;

  while (b < end) {
    stop = blkmap_run (&blk->map, b, end, &state);
    for (; (state == BLK_ALLOCATED || state == BLK_PARTIAL) && b < stop; ++b)
      if (!changes_marked (&blk->changes, b))
        return true;
    b = stop;
  }
  return false;
}

/* Begins a change of blocks [first, first+n) with the store, telling
 * it when the change may write in place into a block whose mark it
 * raises.  Returns 0, or -1 with *err set and no change begun.
 */
static int
begin_change (struct blk *blk, uint64_t first, uint64_t n, int *err)
{
  int r = store_change_begin (blk->store, err);

  if (r <= 0)
    return r;
  if (!changes_held_unmarked (blk, first, n) ||
      store_change_in_place (blk->store, err) == 0)
    return 0;
  store_change_end (blk->store);
  return -1;
}

/* Marks blocks [first, first+n) changed (changes.h), telling the
 * store, and ends the change that begin_change began.
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
  if (begin_change (blk, first, last - first + 1, err) == -1) {
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

  if (blk_reserve_states (blk, first, n, err) == -1)
    return -1;
  if (blkmap_has_places (&blk->map))
    return blk_discard_placed (blk, first, n, err);
  freed = blkmap_space_held (&blk->map, first, n);
  blk_set_states (blk, first, n, BLK_ZERO);
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
                  !blk_reads_zeros_outside (blk, base,
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
    blk_block_part (blk, ends[i], offset, end, &from, &to);
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
  if (begin_change (blk, lock_from, lock_to - lock_from, err) == -1) {
    gate_leave (&blk->gate);
    return -1;
  }
  blk_lock_rmw (blk, &held, lock_from, lock_to - lock_from);
  if (zero_ends)
    r = zero_ends_locked (blk, base, offset, end, err);
  if (r == 0 && first < stop)
    r = discard_locked (blk, first, stop - first, err);
  blk_unlock_rmw (blk, &held);
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
  if (r == -1 && blk_no_room (*err) && blk_view_give_room (blk, given))
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
