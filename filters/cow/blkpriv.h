/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer's own state, shared by its two files and nothing
 * else: blk.c, the requests and the state machine they follow, and
 * blklife.c, an overlay made, started, flushed and freed, and its
 * statistics.  Each lock says here what it protects; docs/design.md
 * has the lock order.
 */

#ifndef COW_BLKPRIV_H
#define COW_BLKPRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "basemap.h"
#include "blkmap.h"
#include "blktypes.h"
#include "changes.h"
#include "lockwaits.h"
#include "rangelock.h"
#include "shardctr.h"
#include "space.h"
#include "store.h"
#include "stripes.h"

struct blk {
  /* The data of allocated blocks (store.h). */
  struct store *store;

  /* The write locks of the stripes of the disk, one per stripe: held
   * over every write and punch of the store, and by a fast-path write
   * over its state lookup too (write_allocated).  The kernel
   * serializes the writes of one file anyway (the inode lock), but its
   * waiters spin, which on few cores starved the threads doing useful
   * work; a mutex waits asleep.  Taken a range's together, in
   * ascending stripe order (stripes_lock).
   */
  struct stripes stripes;

  /* The geometry and the state of every block, under state_lock. */
  struct blkmap map;

  /* What the base's extents told, under base_map_lock (basemap.h). */
  struct basemap base_map;

  /* The rmw locks, on ranges of blocks: a block's state changes only
   * with its rmw lock held, which covers the I/O that justifies the
   * change.
   */
  struct rangelock rmw_locks;

  /* Serializes the first blk_set_size (or blk_start_from_file), which
   * fixes the size and starts the store (I/O: a kept file's header; a
   * throw-away store's map of slots); later calls only look, or check a
   * base against a size taken from the file.  sized is set once under
   * it and read without it (atomic, so that no one waits on that I/O
   * to learn that it is not done): once true, the size and the store
   * are set.  base_met is under it.
   */
  mutex_t start_lock;
  bool sized;
  bool base_met;                /* a base of that size has been met */
  uint64_t store_overhead;      /* the store's bytes besides blocks */

  /* Lets one flush of a kept store run at a time. */
  struct countedlock flush_lock;

  /* The checkpoints and the marks of the blocks changed since them,
   * under their own lock (changes.h).
   */
  struct changes changes;

  /* The disk space counted against cow-max-size, the server's. */
  struct space *space;

  /* Reads copy nothing up before this time (monotonic_ns; 0: none),
   * set when a read's copy-up found no room (atomic).
   */
  uint64_t copy_ups_resume;

  /* Statistics, added to without any lock: enum counter, and the
   * waits for every lock above by enum blk_lock.
   */
  struct shardctr counters;
  struct lockwaits waits;
};

enum counter {
  COPY_UPS_READ,                /* blocks, see struct blk_stats */
  COPY_UPS_CACHE,
  COPY_UPS_RMW,
  COPY_UPS_FILL,
  BASE_READS,
  BASE_READ_BYTES,
  COUNTERS
};

static inline void
stat_add (struct blk *blk, enum counter counter, uint64_t n)
{
  shardctr_add (&blk->counters, counter, n);
}

#endif /* COW_BLKPRIV_H */
