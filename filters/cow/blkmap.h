/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block map: the disk's geometry in blocks and the state of every
 * block (enum blk_state), with the units the overlay holds of each
 * partial block and their places, under state_lock, and what the
 * blocks in a state are charged against cow-max-size.  The block layer
 * (blk.c) decides when a block changes state and tells its store; this
 * unit only keeps the states.
 */

#ifndef COW_BLKMAP_H
#define COW_BLKMAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "blktypes.h"
#include "blockgeom.h"
#include "checks.h"
#include "lockwaits.h"
#include "slotmap.h"
#include "space.h"
#include "statemap.h"

struct blkmap {
  /* The block size fixed by blkmap_init; the disk's size fixed by the
   * layer's start (blklife.c) before any request can reach the map,
   * and read without a lock afterwards.
   */
  struct blockgeom geom;

  /* Protects the fields below that say so: the states, units and
   * places of the blocks, and the view's records.  Held only for one
   * lookup or one update, never over I/O, and nothing is taken inside
   * it.  Its waits count in the layer's, as BLK_LOCK_STATE.
   */
  struct countedlock state_lock;
  /* enum blk_state of each block */
  struct statemap states FIELD_GUARDED_BY (state_lock);

  /* The units of a block: its sub-blocks of 2^unit_shift bytes
   * (blockgeom_sub_shift) where the overlay holds blocks in part
   * (blkmap_start), else the whole block (2^unit_shift bytes too).  A
   * block holds all its units (BLK_ALLOCATED), some (BLK_PARTIAL) or
   * none, and the store keeps each unit it holds in one of two places
   * (store.h), so that a point-in-time view keeps the bytes a unit had
   * at its instant while the export's new bytes of it go to the other
   * place (docs/design.md, "Point-in-time views").
   *
   * units: of each BLK_PARTIAL block, which of its units the overlay
   * holds, bit i for unit i (never 0 nor all of them); 0 for every
   * other block.  where: of each block, bit i set if its unit i is
   * held in place 1; 0 for the units not held.  where exists from the
   * first view on (places, atomic: set once, read without the lock);
   * before, every unit is in place 0.
   */
  unsigned unit_shift;
  struct slotmap units FIELD_GUARDED_BY (state_lock);
  bool places;
  struct slotmap where FIELD_GUARDED_BY (state_lock);

  /* The view (blkview.c), under state_lock.  view_on: changes make
   * records, and keep the units recorded in their places.  Of each
   * block changed since the view was made, its record: its state then
   * plus 1 (0: no record), the units it held then and their places.
   */
  bool view_on FIELD_GUARDED_BY (state_lock);
  struct slotmap view_state FIELD_GUARDED_BY (state_lock);
  struct slotmap view_held FIELD_GUARDED_BY (state_lock);
  struct slotmap view_where FIELD_GUARDED_BY (state_lock);
  struct slotmap view_mark FIELD_GUARDED_BY (state_lock);
};

/* What a block holds: its state, the units held in the overlay (all of
 * them if it is allocated, none unless it is allocated or partial), and
 * of those the ones in place 1.
 */
struct blkmap_held {
  enum blk_state state;
  uint32_t units, where;
};

extern void blkmap_init (struct blkmap *map, uint32_t block_size,
                         struct lockwaits *waits);
extern void blkmap_free (struct blkmap *map);

/* Once the disk's size is set, before any request: with sub_blocks,
 * the units of blocks larger than a sub-block are their sub-blocks,
 * and such blocks may become BLK_PARTIAL.  Returns 0, or -1 with errno
 * set (ENOMEM).
 */
extern int blkmap_start (struct blkmap *map, bool sub_blocks);

/* Whether a block may be held in part: its units are sub-blocks. */
static inline bool
blkmap_holds_parts (const struct blkmap *map)
{
  return map->unit_shift < map->geom.shift;
}

/* The bits of the units of block b that [from, to), inside b,
 * touches.
 */
static inline uint32_t
blkmap_units_of (const struct blkmap *map, uint64_t b, uint64_t from,
                 uint64_t to)
{
  uint64_t start = blockgeom_start (&map->geom, b);
  unsigned first = (from - start) >> map->unit_shift;
  unsigned last = (to - 1 - start) >> map->unit_shift;

  return (uint32_t) ((UINT64_C (2) << last) - (UINT64_C (1) << first));
}

/* The bits of all the units of block b. */
static inline uint32_t
blkmap_all_units (const struct blkmap *map, uint64_t b)
{
  return blkmap_units_of (map, b, blockgeom_start (&map->geom, b),
                          blockgeom_end (&map->geom, b));
}

/* Whether the units may be in place 1: from the first view on. */
static inline bool
blkmap_has_places (const struct blkmap *map)
{
  return __atomic_load_n (&map->places, __ATOMIC_ACQUIRE);
}

static inline void
blkmap_lock (struct blkmap *map) ACQUIRE (map->state_lock)
{
  countedlock_lock (&map->state_lock);
}

static inline void
blkmap_unlock (struct blkmap *map) RELEASE (map->state_lock)
{
  countedlock_unlock (&map->state_lock);
}

/* The lookups, each taking and dropping state_lock. */
static inline enum blk_state
blkmap_get (struct blkmap *map, uint64_t b)
{
  enum blk_state state;

  blkmap_lock (map);
  state = statemap_get (&map->states, b);
  blkmap_unlock (map);
  return state;
}

/* Sets *state to the state of block b and returns the end of its run,
 * at most stop.
 */
static inline uint64_t
blkmap_run (struct blkmap *map, uint64_t b, uint64_t stop,
            enum blk_state *state)
{
  unsigned s;
  uint64_t end;

  blkmap_lock (map);
  end = statemap_run (&map->states, b, stop, &s);
  blkmap_unlock (map);
  *state = s;
  return end;
}

static inline bool
blkmap_all_in (struct blkmap *map, uint64_t first, uint64_t n,
               enum blk_state state)
{
  enum blk_state s;
  return blkmap_run (map, first, first + n, &s) == first + n && s == state;
}

/* Makes room in the map for a change of the states of blocks [first,
 * first+n), before its I/O, so that the final blkmap_set cannot fail
 * after the data has been written.  Returns 0, or -1 with errno set.
 */
static inline int
blkmap_reserve (struct blkmap *map, uint64_t first, uint64_t n)
{
  int r;

  blkmap_lock (map);
  r = statemap_reserve (&map->states, first, n);
  blkmap_unlock (map);
  return r;
}

/* Sets blocks [first, first+n) to state, never BLK_PARTIAL.  Requires
 * blkmap_reserve of them.
 */
extern void blkmap_set (struct blkmap *map, uint64_t first, uint64_t n,
                        enum blk_state state);

/* Whether the overlay holds every byte of [offset, end), in blocks
 * [first, last], where a write may change them in place: they are
 * allocated, or partial holding the units the range touches, all in
 * one place (set in *place), and no view keeps any of those units
 * there.
 */
extern bool blkmap_holds (struct blkmap *map, uint64_t first, uint64_t last,
                          uint64_t offset, uint64_t end, unsigned *place);

/* The charge (space.h) of blocks [first, first+n), whatever their
 * state.
 */
static inline uint64_t
blkmap_space (const struct blkmap *map, uint64_t first, uint64_t n)
{
  return space_of (blockgeom_end (&map->geom, first + n - 1)
                   - blockgeom_start (&map->geom, first), n);
}

/* The charge of the blocks of [first, first+n) that hold space in the
 * overlay: allocated or partial, a partial block being charged whole
 * from its first write, so that no write into it needs space again.
 * Takes state_lock; the answer is stable only under the blocks' rmw
 * locks.
 */
extern uint64_t blkmap_space_held (struct blkmap *map, uint64_t first,
                                   uint64_t n);

/* The space blocks [first, first+n) need to become allocated.  Stable
 * only under their rmw locks.
 */
static inline uint64_t
blkmap_space_to_allocate (struct blkmap *map, uint64_t first, uint64_t n)
{
  return blkmap_space (map, first, n) - blkmap_space_held (map, first, n);
}

/* What block b holds, in *held: as the view has it if in_view and
 * the view has a record of b, else as it is now.
 */
extern void blkmap_get_held (struct blkmap *map, uint64_t b, bool in_view,
                             struct blkmap_held *held);

/* Makes room for block b to hold units in part and in places, and for
 * a record of it, before its I/O.  Returns 0, or -1 with errno set.
 */
extern int blkmap_reserve_held (struct blkmap *map, uint64_t b);

/* Block b holds units (not 0) with those of where in place 1: its
 * state becomes allocated if they are all of its own, else partial
 * (which requires blkmap_holds_parts).  Requires blkmap_reserve_held
 * of b.  Returns the state set.
 */
extern enum blk_state blkmap_set_held (struct blkmap *map, uint64_t b,
                                       uint32_t units, uint32_t where);

/* What block b holds now, in *now, and what the view keeps of it, in
 * *kept, read together: the record of b, or b as it is now if it has
 * none (with make, the record is made of it first, with mark, b's
 * mark now: b is about to change); nothing without the view.  With
 * make, requires blkmap_reserve_held of b.
 */
extern void blkmap_record (struct blkmap *map, uint64_t b, bool make,
                           uint32_t mark, struct blkmap_held *now,
                           struct blkmap_held *kept);

/* The mark block b had when the view was made: its record's, or mark
 * (b's mark now) if it has none.
 */
extern uint32_t blkmap_view_mark (struct blkmap *map, uint64_t b,
                                  uint32_t mark);

/* Units may be in place 1 from now on: the map keeps where they are
 * (a kept file's units in place 1 loaded at the start).  Returns 0, or
 * -1 with errno set.
 */
extern int blkmap_places_begin (struct blkmap *map);

/* The view begins (its records made from now on), with the places; or
 * ends (no more records, those made kept until blkmap_view_free).
 * blkmap_view_begin returns 0, or -1 with errno set.
 */
extern int blkmap_view_begin (struct blkmap *map);
extern void blkmap_view_end (struct blkmap *map);
extern void blkmap_view_free (struct blkmap *map);

/* Calls fn (b, opaque) for each block b with a record, in order,
 * until one returns -1 (then returns -1), holding no lock.  Only once
 * the view ended.
 */
extern int blkmap_each_record (struct blkmap *map,
                               int (*fn) (uint64_t b, void *opaque),
                               void *opaque);

/* Counts the states of the first blocks blocks, holding state_lock in
 * short stretches, so that a walk of a large, fragmented map keeps no
 * request waiting long.
 */
extern void blkmap_count (struct blkmap *map, uint64_t blocks,
                          uint64_t counts[BLK_STATES]);

#endif /* COW_BLKMAP_H */
