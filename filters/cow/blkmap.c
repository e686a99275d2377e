/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block map (blkmap.h). */

#include <config.h>

#include "blkmap.h"
#include "lockranks.h"

/* Runs of states looked at per hold of state_lock by blkmap_count. */
#define COUNT_RUNS_PER_LOCK 1024

void
blkmap_init (struct blkmap *map, uint32_t block_size, struct lockwaits *waits)
{
  map->geom = blockgeom_make (block_size, 0);
  countedlock_init (&map->state_lock, waits, BLK_LOCK_STATE,
                    LOCK_RANK_STATE);
  map->states = (struct statemap) STATEMAP_INIT;
}

void
blkmap_free (struct blkmap *map)
{
  statemap_free (&map->states);
  countedlock_destroy (&map->state_lock);
}

void
blkmap_count (struct blkmap *map, uint64_t blocks, uint64_t counts[3])
{
  uint64_t b = 0;

  counts[0] = counts[1] = counts[2] = 0;
  while (b < blocks) {
    unsigned runs;

    blkmap_lock (map);
    for (runs = 0; runs < COUNT_RUNS_PER_LOCK && b < blocks; ++runs) {
      unsigned state;
      uint64_t end = statemap_run (&map->states, b, blocks, &state);
      counts[state] += end - b;
      b = end;
    }
    blkmap_unlock (map);
  }
}
