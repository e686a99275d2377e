/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* What the base holds, as far as its extents tell (blk_base's
 * describe): for each block, whether it is known to read as zeros.
 * The first question about a block asks the base about a window of
 * BASEMAP_WINDOW bytes from it, and the answer is kept, since the base
 * never changes under the filter.  The map is a cache: a block it has
 * no memory for stays unknown, and its question is asked again.  Two
 * threads asking about one window at once both ask the base and learn
 * the same answer.
 */

#ifndef COW_BASEMAP_H
#define COW_BASEMAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "blktypes.h"
#include "blockgeom.h"
#include "lockwaits.h"
#include "statemap.h"

/* One describe call covers this much of the base: with 64K blocks, the
 * copy-ups of 1024 blocks, so that a base whose extents cost a round
 * trip (the nbd plugin) pays about one per 1024 blocks, not one more
 * per copy-up.  Blocks larger than this are asked about whole.
 */
#define BASEMAP_WINDOW (64 * 1024 * 1024)

struct basemap {
  const struct blockgeom *geom; /* the block map's: the disk's blocks */
  /* Protects known; never held over describe, nothing taken inside.
   * Its waits count in the layer's, as BLK_LOCK_BASE_MAP.
   */
  struct countedlock base_map_lock;
  /* what is known of each block */
  struct statemap known FIELD_GUARDED_BY (base_map_lock);
};

/* An empty map of the blocks of geom, whose size must be set before
 * any basemap_reads_zeros.
 */
extern void basemap_init (struct basemap *map, const struct blockgeom *geom,
                          struct lockwaits *waits);
extern void basemap_free (struct basemap *map);

/* True if block b (below the size) of the base is known to read as
 * zeros, asking base->describe about the window from b on if nobody
 * has yet.  A base without describe, or one that cannot tell, reads as
 * data.
 */
extern bool basemap_reads_zeros (struct basemap *map,
                                 const struct blk_base *base, uint64_t b);

#endif /* COW_BASEMAP_H */
