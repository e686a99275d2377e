/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block map: the disk's geometry in blocks and the state of every
 * block (enum blk_state), under state_lock, and what the blocks in a
 * state are charged against cow-max-size.  The block layer (blk.c)
 * decides when a block changes state and tells its store; this unit
 * only keeps the states.
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
#include "space.h"
#include "statemap.h"

struct blkmap {
  /* The block size fixed by blkmap_init; the disk's size fixed by the
   * layer's start (blklife.c) before any request can reach the map,
   * and read without a lock afterwards.
   */
  struct blockgeom geom;

  /* Protects states, and nothing else.  Held only for one lookup or
   * one update, never over I/O, and nothing is taken inside it.  Its
   * waits count in the layer's, as BLK_LOCK_STATE.
   */
  struct countedlock state_lock;
  struct statemap states;       /* enum blk_state of each block */
};

extern void blkmap_init (struct blkmap *map, uint32_t block_size,
                         struct lockwaits *waits);
extern void blkmap_free (struct blkmap *map);

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

/* Sets blocks [first, first+n) to state.  Requires blkmap_reserve of
 * them.
 */
static inline void
blkmap_set (struct blkmap *map, uint64_t first, uint64_t n,
            enum blk_state state)
{
  blkmap_lock (map);
  statemap_set (&map->states, first, n, state);
  blkmap_unlock (map);
}

/* The charge (space.h) of blocks [first, first+n), whatever their
 * state.
 */
static inline uint64_t
blkmap_space (const struct blkmap *map, uint64_t first, uint64_t n)
{
  return space_of (blockgeom_end (&map->geom, first + n - 1)
                   - blockgeom_start (&map->geom, first), n);
}

/* The charge of the blocks of [first, first+n) in state want.
 * blkmap_space_in takes state_lock; its answer is stable only under
 * the blocks' rmw locks.
 */
static inline uint64_t
blkmap_space_in_locked (struct blkmap *map, uint64_t first, uint64_t n,
                        enum blk_state want) REQUIRES (map->state_lock)
{
  uint64_t b = first, stop = first + n, space = 0;

  CHECK (countedlock_held (&map->state_lock));
  while (b < stop) {
    unsigned state;
    uint64_t end = statemap_run (&map->states, b, stop, &state);
    if (state == want)
      space += blkmap_space (map, b, end - b);
    b = end;
  }
  return space;
}

static inline uint64_t
blkmap_space_in (struct blkmap *map, uint64_t first, uint64_t n,
                 enum blk_state want)
{
  uint64_t space;

  blkmap_lock (map);
  space = blkmap_space_in_locked (map, first, n, want);
  blkmap_unlock (map);
  return space;
}

/* The space blocks [first, first+n) need to become allocated.  Stable
 * only under their rmw locks.
 */
static inline uint64_t
blkmap_space_to_allocate (struct blkmap *map, uint64_t first, uint64_t n)
{
  return blkmap_space (map, first, n)
         - blkmap_space_in (map, first, n, BLK_ALLOCATED);
}

/* Counts the states of the first blocks blocks, holding state_lock in
 * short stretches, so that a walk of a large, fragmented map keeps no
 * request waiting long.
 */
extern void blkmap_count (struct blkmap *map, uint64_t blocks,
                          uint64_t counts[3]);

#endif /* COW_BLKMAP_H */
