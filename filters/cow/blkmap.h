/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The block map: the disk's geometry in blocks, the state of every
 * block (enum blk_state) under state_lock, and what the blocks in a
 * state are charged against cow-max-size.  The block layer (blk.c)
 * decides when a block changes state; this unit only keeps the states,
 * tells the store of each change (store.h) and counts the waits for
 * its lock.  state_lock is never held over I/O but a store's start.
 */

#ifndef COW_BLKMAP_H
#define COW_BLKMAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "blkstate.h"
#include "shardctr.h"
#include "space.h"
#include "statemap.h"
#include "store.h"
#include "timedlock.h"

struct blkmap {
  /* Fixed by blkmap_init. */
  unsigned block_shift;
  uint64_t block_size;

  /* Fixed, under state_lock, by the first blk_set_size, which the
   * connection's .prepare calls before any request can reach the
   * layer; so requests read size without the lock.
   */
  uint64_t size;
  bool size_known;

  /* Told of every reservation and change of states; set once, before
   * the size.
   */
  struct store *store;

  pthread_mutex_t state_lock;   /* protects states; never held over I/O */
  struct statemap states;       /* enum blk_state of each block */
  /* The two, as a kept store reads them. */
  struct store_states store_states;

  struct shardctr waits;        /* waits for state_lock: count, ns */
};

/* Returns 0, or -1 with errno set. */
extern int blkmap_init (struct blkmap *map, uint32_t block_size);
extern void blkmap_free (struct blkmap *map);

/* Geometry: the first byte of block b, the end of block b (the last
 * block of a disk whose size is not a multiple of the block size is
 * short), and the block of a byte.
 */
static inline uint64_t
blkmap_start (const struct blkmap *map, uint64_t b)
{
  return b << map->block_shift;
}

static inline uint64_t
blkmap_end (const struct blkmap *map, uint64_t b)
{
  uint64_t end = (b + 1) << map->block_shift;
  return end < map->size ? end : map->size;
}

static inline uint64_t
blkmap_of (const struct blkmap *map, uint64_t offset)
{
  return offset >> map->block_shift;
}

/* Takes state_lock, counting the wait if there was one. */
static inline void
blkmap_lock (struct blkmap *map)
{
  uint64_t waited = timed_lock (&map->state_lock);

  if (waited) {
    shardctr_add (&map->waits, 0, 1);
    shardctr_add (&map->waits, 1, waited);
  }
}

static inline void
blkmap_unlock (struct blkmap *map)
{
  pthread_mutex_unlock (&map->state_lock);
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

/* Logs that the map could not grow; sets *err. */
extern void blkmap_reserve_failed (int *err);

/* Makes room in the map, and in the store's copy of it, before the I/O
 * of a state change, so that the final blkmap_set cannot fail after
 * the data has been written.  Returns 0, or -1 with *err set after
 * nbdkit_error.
 */
static inline int
blkmap_reserve (struct blkmap *map, uint64_t first, uint64_t n, int *err)
{
  int r;

  blkmap_lock (map);
  r = statemap_reserve (&map->states, first, n);
  if (r == 0)
    r = store_reserve_states (map->store, first, n);
  blkmap_unlock (map);
  if (r == -1)
    blkmap_reserve_failed (err);
  return r;
}

/* Sets blocks [first, first+n) to state.  Requires the blocks' rmw
 * locks and blkmap_reserve.
 */
static inline void
blkmap_set (struct blkmap *map, uint64_t first, uint64_t n,
            enum blk_state state)
{
  blkmap_lock (map);
  statemap_set (&map->states, first, n, state);
  store_states_changed (map->store, first, n);
  blkmap_unlock (map);
}

/* The charge (space.h) of blocks [first, first+n), whatever their
 * state.
 */
static inline uint64_t
blkmap_space (const struct blkmap *map, uint64_t first, uint64_t n)
{
  return space_of (blkmap_end (map, first + n - 1) - blkmap_start (map, first),
                   n);
}

/* The charge of the blocks of [first, first+n) in state want.
 * blkmap_space_in_locked requires state_lock; blkmap_space_in takes
 * it, and its answer is stable only under the blocks' rmw locks.
 */
static inline uint64_t
blkmap_space_in_locked (struct blkmap *map, uint64_t first, uint64_t n,
                        enum blk_state want)
{
  uint64_t b = first, stop = first + n, space = 0;

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

/* Counts the blocks in each state, holding state_lock in short
 * stretches, so that a walk of a large, fragmented map keeps no
 * request waiting long; all zero while the size is unknown.
 */
extern void blkmap_count (struct blkmap *map, uint64_t blocks[3]);

/* The waits for state_lock: how many, and their nanoseconds. */
extern void blkmap_waits (const struct blkmap *map, uint64_t *waits,
                          uint64_t *ns);

#endif /* COW_BLKMAP_H */
