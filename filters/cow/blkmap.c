/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The block map (blkmap.h). */

#include <config.h>

#include <errno.h>
#include <stddef.h>

#include <nbdkit-filter.h>

#include "blkmap.h"
#include "ispowerof2.h"

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

void
blkmap_reserve_failed (int *err)
{
  *err = errno;
  nbdkit_error ("cow: cannot grow the block state map: %m");
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
