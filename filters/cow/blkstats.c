/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer's statistics (blk.h): what an overlay holds, its
 * view, and what its requests cost, gathered from the layer's parts
 * without taking any of its locks but the block map's, for a lookup.
 */

#include <config.h>

#include <string.h>

#include "blk.h"
#include "blkpriv.h"

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
  stats->block_size = blockgeom_block_size (&blk->map.geom);
  stats->files = store_files (blk->store);
  if (blk_is_sized (blk))
    blkmap_count (&blk->map, blockgeom_blocks (&blk->map.geom), stats->blocks);
  stats->blocks[BLK_ALLOCATED] += stats->blocks[BLK_PARTIAL];
  stats->view_state = blk_view_get (blk, stats->view_name, &stats->view_kept);
  stats->overlay_bytes = store_bytes (blk->store, stats->blocks[BLK_ALLOCATED]
                                      * stats->block_size + stats->view_kept);
  stats->copy_ups_read = shardctr_sum (&blk->counters, COPY_UPS_READ);
  stats->copy_ups_cache = shardctr_sum (&blk->counters, COPY_UPS_CACHE);
  stats->copy_ups_rmw = shardctr_sum (&blk->counters, COPY_UPS_RMW);
  stats->copy_ups_fill = shardctr_sum (&blk->counters, COPY_UPS_FILL);
  stats->base_reads = shardctr_sum (&blk->counters, BASE_READS);
  stats->base_read_bytes = shardctr_sum (&blk->counters, BASE_READ_BYTES);
  stats->view_copied = shardctr_sum (&blk->counters, VIEW_COPIED_BYTES);
  for (i = 0; i < BLK_LOCKS; ++i)
    lockwaits_sum (&blk->waits, i, &stats->lock_waits[i],
                   &stats->lock_wait_ns[i]);
}
