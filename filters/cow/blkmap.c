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
  map->sub_shift = 0;
  map->subs = (struct slotmap) SLOTMAP_INIT;
}

void
blkmap_free (struct blkmap *map)
{
  statemap_free (&map->states);
  slotmap_free (&map->subs);
  countedlock_destroy (&map->state_lock);
}

int
blkmap_start (struct blkmap *map, bool sub_blocks)
{
  unsigned shift = map->geom.shift;
  unsigned sub_shift = blockgeom_sub_shift (&map->geom);
  if (!sub_blocks || sub_shift >= shift)
    return 0;
  if (slotmap_init (&map->subs, blockgeom_blocks (&map->geom)) == -1)
    return -1;
  map->sub_shift = sub_shift;
  return 0;
}

/* Clears the sub-blocks of the partial blocks of [first, stop). */
static void
clear_subs_locked (struct blkmap *map, uint64_t first, uint64_t stop)
  REQUIRES (map->state_lock)
{
  uint64_t b = first;

  while (b < stop) {
    unsigned state;
    uint64_t end = statemap_run (&map->states, b, stop, &state);

    for (; state == BLK_PARTIAL && b < end; ++b)
      slotmap_set (&map->subs, b, 0);
    b = end;
  }
}

void
blkmap_set (struct blkmap *map, uint64_t first, uint64_t n,
            enum blk_state state)
{
  CHECK (state != BLK_PARTIAL);
  blkmap_lock (map);
  if (map->sub_shift)
    clear_subs_locked (map, first, first + n);
  statemap_set (&map->states, first, n, state);
  blkmap_unlock (map);
}

enum blk_state
blkmap_set_subs (struct blkmap *map, uint64_t b, uint32_t subs)
{
  enum blk_state state = subs == blkmap_all_subs (map, b)
                         ? BLK_ALLOCATED : BLK_PARTIAL;

  CHECK (map->sub_shift && subs != 0);
  blkmap_lock (map);
  slotmap_set (&map->subs, b, state == BLK_PARTIAL ? subs : 0);
  statemap_set (&map->states, b, 1, state);
  blkmap_unlock (map);
  return state;
}

bool
blkmap_holds (struct blkmap *map, uint64_t first, uint64_t last,
              uint64_t offset, uint64_t end)
{
  uint64_t b = first, stop = last + 1;
  bool holds = true;

  blkmap_lock (map);
  while (holds && b < stop) {
    unsigned state;
    uint64_t run_end = statemap_run (&map->states, b, stop, &state);

    if (state == BLK_PARTIAL) {
      uint64_t from = blockgeom_start (&map->geom, b);
      uint64_t to = blockgeom_end (&map->geom, b);
      uint32_t need = blkmap_subs_of (map, b, offset > from ? offset : from,
                                      end < to ? end : to);

      holds = (slotmap_get (&map->subs, b) & need) == need;
      run_end = b + 1;
    }
    else
      holds = state == BLK_ALLOCATED;
    b = run_end;
  }
  blkmap_unlock (map);
  return holds;
}

uint64_t
blkmap_space_held (struct blkmap *map, uint64_t first, uint64_t n)
{
  uint64_t b = first, stop = first + n, space = 0;

  blkmap_lock (map);
  while (b < stop) {
    unsigned state;
    uint64_t end = statemap_run (&map->states, b, stop, &state);

    if (state == BLK_ALLOCATED || state == BLK_PARTIAL)
      space += blkmap_space (map, b, end - b);
    b = end;
  }
  blkmap_unlock (map);
  return space;
}

void
blkmap_count (struct blkmap *map, uint64_t blocks,
              uint64_t counts[BLK_STATES])
{
  uint64_t b = 0;
  unsigned i;

  for (i = 0; i < BLK_STATES; ++i)
    counts[i] = 0;
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
