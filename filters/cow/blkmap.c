/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The block map (blkmap.h). */

#include <config.h>

#include <errno.h>
#include <stddef.h>

#include <nbdkit-filter.h>

#include "blkmap.h"
#include "ispowerof2.h"
#include "space.h"

/* Runs of states looked at per hold of state_lock by blkmap_count. */
#define COUNT_RUNS_PER_LOCK 1024

/* The struct blkmap whose store_states states is. */
static struct blkmap *
owner_of (struct store_states *states)
{
  return (struct blkmap *) ((char *) states -
                            offsetof (struct blkmap, store_states));
}

/* The store_states of a kept store: state_lock, its waits counted. */
static void
lock_store_states (struct store_states *states)
{
  blkmap_lock (owner_of (states));
}

static void
unlock_store_states (struct store_states *states)
{
  blkmap_unlock (owner_of (states));
}

int
blkmap_init (struct blkmap *map, uint32_t block_size)
{
  if (shardctr_init (&map->waits, 2) == -1)
    return -1;
  map->block_size = block_size;
  map->block_shift = log_2_bits (block_size);
  map->size = 0;
  map->size_known = false;
  map->store = NULL;
  pthread_mutex_init (&map->state_lock, NULL);
  map->states = (struct statemap) STATEMAP_INIT;
  map->store_states = (struct store_states) {
    .map = &map->states,
    .lock = lock_store_states,
    .unlock = unlock_store_states,
  };
  return 0;
}

void
blkmap_free (struct blkmap *map)
{
  statemap_free (&map->states);
  pthread_mutex_destroy (&map->state_lock);
  shardctr_free (&map->waits);
}

int
blkmap_reserve (struct blkmap *map, uint64_t first, uint64_t n, int *err)
{
  int r;

  blkmap_lock (map);
  r = statemap_reserve (&map->states, first, n);
  if (r == 0)
    r = store_reserve_states (map->store, first, n);
  blkmap_unlock (map);
  if (r == -1) {
    *err = errno;
    nbdkit_error ("cow: cannot grow the block state map: %m");
  }
  return r;
}

void
blkmap_set (struct blkmap *map, uint64_t first, uint64_t n,
            enum blk_state state)
{
  blkmap_lock (map);
  statemap_set (&map->states, first, n, state);
  store_states_changed (map->store, first, n);
  blkmap_unlock (map);
}

uint64_t
blkmap_space (const struct blkmap *map, uint64_t first, uint64_t n)
{
  return space_of (blkmap_end (map, first + n - 1) - blkmap_start (map, first),
                   n);
}

uint64_t
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

uint64_t
blkmap_space_in (struct blkmap *map, uint64_t first, uint64_t n,
                 enum blk_state want)
{
  uint64_t space;

  blkmap_lock (map);
  space = blkmap_space_in_locked (map, first, n, want);
  blkmap_unlock (map);
  return space;
}

/* size_known is read under state_lock: the statistics can walk the
 * map before the first connection sets the size.
 */
static uint64_t
blocks_known (struct blkmap *map)
{
  uint64_t blocks = 0;

  blkmap_lock (map);
  if (map->size_known)
    blocks = (map->size + map->block_size - 1) >> map->block_shift;
  blkmap_unlock (map);
  return blocks;
}

void
blkmap_count (struct blkmap *map, uint64_t blocks[3])
{
  uint64_t total = blocks_known (map), b = 0;

  blocks[0] = blocks[1] = blocks[2] = 0;
  while (b < total) {
    unsigned runs;

    blkmap_lock (map);
    for (runs = 0; runs < COUNT_RUNS_PER_LOCK && b < total; ++runs) {
      unsigned state;
      uint64_t end = statemap_run (&map->states, b, total, &state);
      blocks[state] += end - b;
      b = end;
    }
    blkmap_unlock (map);
  }
}

void
blkmap_waits (const struct blkmap *map, uint64_t *waits, uint64_t *ns)
{
  *waits = shardctr_sum (&map->waits, 0);
  *ns = shardctr_sum (&map->waits, 1);
}
