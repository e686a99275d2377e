/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The map of what the base holds (basemap.h). */

#include <config.h>

#include "basemap.h"
#include "timedlock.h"
#include "wholeblocks.h"

enum base_known {
  BASE_UNKNOWN = 0,             /* not asked yet, or no answer */
  BASE_ZERO = 1,                /* the whole block reads as zeros */
  BASE_DATA = 2,                /* it may hold data: read it */
};

/* A describe call in progress: where its runs go, and the waits for
 * base_map_lock that marking them cost.
 */
struct learning {
  struct basemap *map;
  uint64_t *waited;
};

void
basemap_init (struct basemap *map, unsigned block_shift)
{
  map->block_shift = block_shift;
  map->size = 0;
  pthread_mutex_init (&map->base_map_lock, NULL);
  map->known = (struct statemap) STATEMAP_INIT;
}

void
basemap_set_size (struct basemap *map, uint64_t size)
{
  map->size = size;
}

void
basemap_free (struct basemap *map)
{
  statemap_free (&map->known);
  pthread_mutex_destroy (&map->base_map_lock);
}

static void
lock_map (struct basemap *map, uint64_t *waited)
{
  *waited += timed_lock (&map->base_map_lock);
}

static enum base_known
get_known (struct basemap *map, uint64_t b, uint64_t *waited)
{
  enum base_known known;

  lock_map (map, waited);
  known = statemap_get (&map->known, b);
  pthread_mutex_unlock (&map->base_map_lock);
  return known;
}

/* Marks blocks [first, end) as known, if the map has room for them. */
static void
mark (struct basemap *map, uint64_t first, uint64_t end,
      enum base_known known, uint64_t *waited)
{
  if (first >= end)
    return;
  lock_map (map, waited);
  if (statemap_reserve (&map->known, first, end - first) == 0)
    statemap_set (&map->known, first, end - first, known);
  pthread_mutex_unlock (&map->base_map_lock);
}

/* The blk_found_run of describe: a block is zero only if the run
 * covers all of it (up to the size, for the short last block), and a
 * block that any run of data touches is data.
 */
static void
found_run (void *opaque, uint64_t offset, uint64_t length, bool zero)
{
  const struct learning *l = opaque;
  struct basemap *map = l->map;
  uint64_t end = offset + length < map->size ? offset + length : map->size;
  uint64_t first, stop;

  if (offset >= end)
    return;
  if (zero) {
    whole_blocks (map->block_shift, map->size, offset, end, &first, &stop);
    mark (map, first, stop, BASE_ZERO, l->waited);
  }
  else
    mark (map, offset >> map->block_shift,
          ((end - 1) >> map->block_shift) + 1, BASE_DATA, l->waited);
}

bool
basemap_reads_zeros (struct basemap *map, const struct blk_base *base,
                     uint64_t b, uint64_t *waited)
{
  uint64_t start = b << map->block_shift, count = map->size - start;
  uint64_t window = UINT64_C (1) << map->block_shift;
  struct learning l = { .map = map, .waited = waited };
  enum base_known known = get_known (map, b, waited);

  if (known != BASE_UNKNOWN || base->describe == NULL)
    return known == BASE_ZERO;
  if (window < BASEMAP_WINDOW)
    window = BASEMAP_WINDOW;
  if (count > window)
    count = window;
  if (base->describe (base->opaque, count, start, found_run, &l) == -1)
    return false;
  return get_known (map, b, waited) == BASE_ZERO;
}
