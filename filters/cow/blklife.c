/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The life of an overlay in the block layer (blk.h): made with its
 * store, sized by the first connection, flushed, freed; and its
 * statistics.  The requests are in blk.c.
 */

#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "blk.h"
#include "blkpriv.h"
#include "storeio.h"
#include "timedlock.h"

/* A struct blk with no store and no size yet. */
static struct blk *
blk_alloc (uint32_t block_size, struct space *space)
{
  struct blk *blk = calloc (1, sizeof *blk);

  if (blk == NULL || shardctr_init (&blk->counters, COUNTERS) == -1) {
    nbdkit_error ("cow: calloc: %m");
    free (blk);
    return NULL;
  }
  if (blkmap_init (&blk->map, block_size) == -1) {
    nbdkit_error ("cow: calloc: %m");
    shardctr_free (&blk->counters);
    free (blk);
    return NULL;
  }
  basemap_init (&blk->base_map, blk->map.block_shift);
  rangelock_init (&blk->rmw_locks);
  pthread_mutex_init (&blk->flush_lock, NULL);
  blk->space = space;
  return blk;
}

/* blk with its store, or NULL if there is none (freeing blk). */
static struct blk *
with_store (struct blk *blk, struct store *store)
{
  if (store == NULL) {
    blk_free (blk);
    return NULL;
  }
  blk->store = store;
  blk->map.store = store;
  return blk;
}

struct blk *
blk_new (uint32_t block_size, struct temp_files *files, struct space *space)
{
  struct blk *blk = blk_alloc (block_size, space);

  if (blk == NULL)
    return NULL;
  return with_store (blk, store_temp_new (files, blk->map.block_shift));
}

struct blk *
blk_new_kept (uint32_t block_size, const char *path, const char *name,
              unsigned stripes, struct space *space)
{
  struct blk *blk = blk_alloc (block_size, space);

  if (blk == NULL)
    return NULL;
  return with_store (blk, store_kept_open (path, name, block_size, stripes,
                                           &blk->map.store_states));
}

int
blk_free (struct blk *blk)
{
  int r = 0;

  if (blk == NULL)
    return 0;
  if (blk->store)
    r = store_close (blk->store);   /* a kept one flushed first */
  blkmap_free (&blk->map);
  basemap_free (&blk->base_map);
  pthread_mutex_destroy (&blk->flush_lock);
  rangelock_destroy (&blk->rmw_locks);
  shardctr_free (&blk->counters);
  free (blk);
  return r;
}

/* Starts the store for a base of size bytes, and charges what it holds
 * (a kept file's header, states and blocks) against cow-max-size.
 * Requires state_lock.
 */
static int
start_store (struct blk *blk, uint64_t size)
{
  if (size == 0)
    return 0;
  if (store_start (blk->store, size) == -1)
    return -1;
  space_charge (blk->space, blk->store->overhead +
                blkmap_space_in_locked (&blk->map, 0,
                                        blkmap_of (&blk->map, size - 1) + 1,
                                        BLK_ALLOCATED));
  return 0;
}

/* The first call does the overlay's setup I/O under state_lock: no
 * request can reach the layer before it returns.
 */
int
blk_set_size (struct blk *blk, uint64_t size)
{
  int r = 0;

  blkmap_lock (&blk->map);
  if (!blk->map.size_known) {
    blk->map.size = size;
    basemap_set_size (&blk->base_map, size);
    r = start_store (blk, size);
    blk->map.size_known = r == 0;
  }
  else if (blk->map.size != size) {
    nbdkit_error ("cow: the base changed size from %" PRIu64 " to %" PRIu64
                  " bytes; the overlay cannot follow it", blk->map.size, size);
    r = -1;
  }
  blkmap_unlock (&blk->map);
  return r;
}

bool
blk_is_sized (struct blk *blk)
{
  bool sized;

  blkmap_lock (&blk->map);
  sized = blk->map.size_known;
  blkmap_unlock (&blk->map);
  return sized;
}

int
blk_flush (struct blk *blk, int *err)
{
  uint64_t waited;
  int r;

  if (!store_flushes (blk->store))
    return 0;
  waited = timed_lock (&blk->flush_lock);
  if (waited)
    count_wait (blk, BLK_LOCK_FLUSH, waited);
  r = store_flush (blk->store, err);
  pthread_mutex_unlock (&blk->flush_lock);
  return r;
}

/* Statistics. */

const char *
blk_lock_name (enum blk_lock lock)
{
  static const char *const names[BLK_LOCKS] = {
    [BLK_LOCK_RMW] = "rmw_locks",
    [BLK_LOCK_STATE] = "state_lock",
    [BLK_LOCK_WRITE] = "write_lock",
    [BLK_LOCK_FLUSH] = "flush_lock",
    [BLK_LOCK_BASE_MAP] = "base_map_lock",
  };
  return names[lock];
}

void
blk_get_stats (struct blk *blk, struct blk_stats *stats)
{
  unsigned i;

  memset (stats, 0, sizeof *stats);
  stats->block_size = blk->map.block_size;
  stats->files = store_files (blk->store);
  blkmap_count (&blk->map, stats->blocks);
  stats->overlay_bytes = store_bytes (blk->store);
  stats->copy_ups_read = shardctr_sum (&blk->counters, COPY_UPS_READ);
  stats->copy_ups_cache = shardctr_sum (&blk->counters, COPY_UPS_CACHE);
  stats->copy_ups_rmw = shardctr_sum (&blk->counters, COPY_UPS_RMW);
  stats->base_reads = shardctr_sum (&blk->counters, BASE_READS);
  stats->base_read_bytes = shardctr_sum (&blk->counters, BASE_READ_BYTES);
  stats->space_limit = space_limit (blk->space);
  stats->space_used = space_used (blk->space);
  stats->space_refusals = space_refusals (blk->space);
  stats->filesystem_refusals = storeio_room_refusals ();
  for (i = 0; i < BLK_LOCKS; ++i) {
    stats->lock_waits[i] = shardctr_sum (&blk->counters, LOCK_WAITS + i);
    stats->lock_wait_ns[i] = shardctr_sum (&blk->counters, LOCK_WAIT_NS + i);
  }
  blkmap_waits (&blk->map, &stats->lock_waits[BLK_LOCK_STATE],
                &stats->lock_wait_ns[BLK_LOCK_STATE]);
}
