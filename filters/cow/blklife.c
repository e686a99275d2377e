/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The life of an overlay in the block layer (blk.h): made with its
 * store, started by the first connection, flushed, freed.  The
 * requests are in blk.c, the statistics in blkstats.c.
 */

#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "blk.h"
#include "blkpriv.h"
#include "lockranks.h"

/* A struct blk with no store and no size yet, its disk cut into
 * stripes stripes.
 */
static struct blk *
blk_alloc (uint32_t block_size, unsigned stripes, struct space *space)
{
  struct blk *blk = calloc (1, sizeof *blk);

  if (blk == NULL || shardctr_init (&blk->counters, COUNTERS) == -1) {
    nbdkit_error ("cow: calloc: %m");
    free (blk);
    return NULL;
  }
  blkmap_init (&blk->map, block_size, &blk->waits);
  if (lockwaits_init (&blk->waits, BLK_LOCKS) == -1 ||
      stripes_init (&blk->stripes, stripes, blk->map.geom.shift) == -1) {
    nbdkit_error ("cow: calloc: %m");
    goto free_map;
  }
  if (blk_give_back_init (blk) == -1) {
    nbdkit_error ("cow: the overlay's give-back: %m");
    goto free_stripes;
  }
  if (gate_init (&blk->gate, LOCK_RANK_GATE) == -1) {
    nbdkit_error ("cow: the overlay's gate: %m");
    goto free_give_back;
  }
  basemap_init (&blk->base_map, &blk->map.geom, &blk->waits);
  rangelock_init (&blk->rmw_locks, LOCK_RANK_RMW);
  held_init (&blk->start_lock, LOCK_RANK_START);
  countedlock_init (&blk->flush_lock, &blk->waits, BLK_LOCK_FLUSH,
                    LOCK_RANK_FLUSH);
  changes_init (&blk->changes);
  blk->space = space;
  return blk;

 free_give_back:
  blk_give_back_destroy (blk);
 free_stripes:
  stripes_free (&blk->stripes);
 free_map:
  blkmap_free (&blk->map);
  lockwaits_free (&blk->waits);
  shardctr_free (&blk->counters);
  free (blk);
  return NULL;
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
  return blk;
}

struct blk *
blk_new (uint32_t block_size, unsigned stripes, struct temp_files *files,
         struct space *space)
{
  struct blk *blk = blk_alloc (block_size, stripes, space);

  if (blk == NULL)
    return NULL;
  return with_store (blk, store_temp_new (files, &blk->stripes));
}

/* A record a kept store loaded, into the map, at the start: a block
 * with units in place 1 makes the map keep places.
 */
static int
load_blocks (void *opaque, const struct store_blocks *r)
{
  struct blkmap *map = opaque;

  if (r->where != 0 && blkmap_places_begin (map) == -1)
    return -1;
  if (r->state == BLK_PARTIAL || r->where != 0) {
    if (blkmap_reserve_held (map, r->first) == -1)
      return -1;
    blkmap_set_held (map, r->first,
                     r->state == BLK_PARTIAL
                     ? r->units : blkmap_all_units (map, r->first),
                     r->where);
    return 0;
  }
  if (blkmap_reserve (map, r->first, r->n) == -1)
    return -1;
  blkmap_set (map, r->first, r->n, r->state);
  return 0;
}

struct blk *
blk_new_kept (uint32_t block_size, unsigned stripes, const char *path,
              const char *name, struct space *space)
{
  struct blk *blk = blk_alloc (block_size, stripes, space);

  if (blk == NULL)
    return NULL;
  return with_store (blk, store_kept_open (path, name, block_size,
                                           &blk->stripes, &blk->changes));
}

uint64_t
blk_space_charged (struct blk *blk)
{
  if (!blk->sized)
    return 0;
  return blk->store_overhead + blk->view_kept +
         blkmap_space_held (&blk->map, 0, blockgeom_blocks (&blk->map.geom));
}

int
blk_free (struct blk *blk)
{
  int r = 0;

  if (blk == NULL)
    return 0;
  blk_view_end (blk);
  space_give (blk->space, blk_space_charged (blk));
  if (blk->store)
    r = store_close (blk->store);   /* a kept one flushed first */
  blkmap_free (&blk->map);
  blk_give_back_destroy (blk);
  gate_destroy (&blk->gate);
  basemap_free (&blk->base_map);
  changes_free (&blk->changes);
  countedlock_destroy (&blk->flush_lock);
  held_destroy (&blk->start_lock);
  rangelock_destroy (&blk->rmw_locks);
  stripes_free (&blk->stripes);
  lockwaits_free (&blk->waits);
  shardctr_free (&blk->counters);
  free (blk);
  return r;
}

/* Starts the store for a base of size bytes, and charges what it holds
 * (a kept file's header, states and blocks) against cow-max-size.
 */
static int
start_store (struct blk *blk, uint64_t size) REQUIRES (blk->start_lock)
{
  uint64_t overhead;

  CHECK (held_by_me (&blk->start_lock));
  if (changes_start (&blk->changes, blockgeom_blocks (&blk->map.geom))
      == -1) {
    nbdkit_error ("cow: cannot hold the marks of changed blocks: %m");
    return -1;
  }
  if (blkmap_start (&blk->map, store_holds_parts (blk->store)) == -1) {
    nbdkit_error ("cow: cannot hold the map of partial blocks: %m");
    return -1;
  }
  if (size == 0)
    return 0;
  if (store_start (blk->store, size, &overhead) == -1)
    return -1;
  if (store_loaded_blocks (blk->store, load_blocks, &blk->map) == -1) {
    nbdkit_error ("cow: cannot hold the block states in memory: %m");
    return -1;
  }
  blk->store_overhead = overhead;
  space_charge (blk->space, overhead +
                blkmap_space_held (&blk->map, 0,
                                   blockgeom_blocks (&blk->map.geom)));
  return 0;
}

/* Fixes the size and starts the store. */
static int
size_and_start (struct blk *blk, uint64_t size) REQUIRES (blk->start_lock)
{
  int r;

  blk->map.geom.size = size;
  r = start_store (blk, size);
  __atomic_store_n (&blk->sized, r == 0, __ATOMIC_RELEASE);
  return r;
}

/* The first call sets the size and starts the store holding
 * start_lock: no request can reach the layer before it returns.
 */
int
blk_set_size (struct blk *blk, uint64_t size)
{
  int r = 0;

  held_lock (&blk->start_lock);
  if (!blk->sized) {
    r = size_and_start (blk, size);
    blk->base_met = r == 0;
  }
  else if (!blk->base_met) {
    r = store_check_size (blk->store, size);
    blk->base_met = r == 0;
  }
  else if (blk->map.geom.size != size) {
    nbdkit_error ("cow: the base changed size from %" PRIu64 " to %" PRIu64
                  " bytes; the overlay cannot follow it", blk->map.geom.size,
                  size);
    r = -1;
  }
  held_unlock (&blk->start_lock);
  return r;
}

int
blk_start_from_file (struct blk *blk)
{
  uint64_t size = store_made_size (blk->store);
  int r = 0;

  if (size == 0)
    return 0;
  held_lock (&blk->start_lock);
  if (!blk->sized)
    r = size_and_start (blk, size);
  held_unlock (&blk->start_lock);
  return r;
}

const struct kept_facts *
blk_kept_facts (struct blk *blk)
{
  return store_facts (blk->store);
}

int
blk_keep_facts (struct blk *blk, const struct kept_facts *facts)
{
  return store_keep_facts (blk->store, facts);
}

/* The value of one of blk's flags under start_lock. */
static bool
start_flag (struct blk *blk, const bool *flag)
{
  bool value;

  held_lock (&blk->start_lock);
  value = *flag;
  held_unlock (&blk->start_lock);
  return value;
}

bool
blk_met_base (struct blk *blk)
{
  return start_flag (blk, &blk->base_met);
}

bool
blk_is_sized (struct blk *blk)
{
  return __atomic_load_n (&blk->sized, __ATOMIC_ACQUIRE);
}

uint64_t
blk_size (struct blk *blk)
{
  return blk->map.geom.size;
}

bool
blk_holds_all (struct blk *blk)
{
  uint64_t counts[BLK_STATES];

  blkmap_count (&blk->map, blockgeom_blocks (&blk->map.geom), counts);
  return counts[BLK_NOT_ALLOCATED] == 0 && counts[BLK_PARTIAL] == 0;
}

/* The store_holder of a flush: the stripes' write locks of a range. */
static void
hold_stripes (void *opaque, uint64_t offset, uint64_t count) NO_TSA
{
  struct blk *blk = opaque;

  stripes_lock (&blk->stripes, offset, count);
}

static void
release_stripes (void *opaque, uint64_t offset, uint64_t count) NO_TSA
{
  struct blk *blk = opaque;

  stripes_unlock (&blk->stripes, offset, count);
}

int
blk_flush (struct blk *blk, int *err)
{
  const struct store_holder holder = {
    .hold = hold_stripes, .release = release_stripes, .opaque = blk,
  };
  int r;

  if (!store_flushes (blk->store))
    return 0;
  countedlock_lock (&blk->flush_lock);
  r = store_flush (blk->store, &holder, err);
  countedlock_unlock (&blk->flush_lock);
  return r;
}
