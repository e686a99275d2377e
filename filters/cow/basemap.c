/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The map of what the base holds (basemap.h). */

#include <config.h>

#include "basemap.h"
#include "lockranks.h"

enum base_known {
  BASE_UNKNOWN = 0,             /* not asked yet, or no answer */
  BASE_ZERO = 1,                /* the whole block reads as zeros */
  BASE_DATA = 2,                /* it may hold data: read it */
};

void
basemap_init (struct basemap *map, const struct blockgeom *geom,
              struct lockwaits *waits)
{
  map->geom = geom;
  countedlock_init (&map->base_map_lock, waits, BLK_LOCK_BASE_MAP,
                    LOCK_RANK_BASE_MAP);
  map->known = (struct statemap) STATEMAP_INIT;
}

void
basemap_free (struct basemap *map)
{
  statemap_free (&map->known);
  countedlock_destroy (&map->base_map_lock);
}

static enum base_known
get_known (struct basemap *map, uint64_t b)
{
  enum base_known known;

  countedlock_lock (&map->base_map_lock);
  known = statemap_get (&map->known, b);
  countedlock_unlock (&map->base_map_lock);
  return known;
}

/* Marks blocks [first, end) as known, if the map has room for them. */
static void
mark (struct basemap *map, uint64_t first, uint64_t end,
      enum base_known known)
{
  if (first >= end)
    return;
  countedlock_lock (&map->base_map_lock);
  if (statemap_reserve (&map->known, first, end - first) == 0)
    statemap_set (&map->known, first, end - first, known);
  countedlock_unlock (&map->base_map_lock);
}

/* The blk_found_run of describe: a block is zero only if the run
 * covers all of it (up to the size, for the short last block), and a
 * block that any run of data touches is data.
 */
static void
found_run (void *opaque, uint64_t offset, uint64_t length, bool zero)
{
  struct basemap *map = opaque;
  const struct blockgeom *g = map->geom;
  uint64_t end = offset + length < g->size ? offset + length : g->size;
  uint64_t first, stop;

  if (offset >= end)
    return;
  if (zero) {
    blockgeom_whole (g, offset, end, &first, &stop);
    mark (map, first, stop, BASE_ZERO);
  }
  else
    mark (map, blockgeom_block (g, offset), blockgeom_block (g, end - 1) + 1,
          BASE_DATA);
}

bool
basemap_reads_zeros (struct basemap *map, const struct blk_base *base,
                     uint64_t b)
{
  const struct blockgeom *g = map->geom;
  uint64_t start = blockgeom_start (g, b), count = g->size - start;
  uint64_t window = blockgeom_block_size (g);
  enum base_known known = get_known (map, b);

  if (known != BASE_UNKNOWN || base->describe == NULL)
    return known == BASE_ZERO;
  if (window < BASEMAP_WINDOW)
    window = BASEMAP_WINDOW;
  if (count > window)
    count = window;
  if (base->describe (base->opaque, count, start, found_run, map) == -1)
    return false;
  return get_known (map, b) == BASE_ZERO;
}
