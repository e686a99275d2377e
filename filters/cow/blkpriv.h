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
  /* Set once, when the layer is made: the data of allocated blocks
   * (store.h), and the disk space counted against cow-max-size, the
   * server's.
   */
  struct store *store;
  struct space *space;

  /* The write locks of the stripes of the disk, one per stripe: held
   * over every write and punch of the store, and by a fast-path write
   * over its state lookup too (write_allocated).  The kernel
   * serializes the writes of one file anyway (the inode lock), but its
   * waiters spin, which on few cores starved the threads doing useful
   * work; a mutex waits asleep.  Taken a range's together, in
   * ascending stripe order (stripes_lock).
   */
  struct stripes stripes;

  /* The rmw locks, on ranges of blocks: a block's state changes only
   * with its rmw lock held, which covers the I/O that justifies the
   * change.
   */
  struct rangelock rmw_locks;

  /* Under state_lock: the geometry and the state of every block. */
  struct blkmap map;

  /* Under base_map_lock: what the base's extents told (basemap.h). */
  struct basemap base_map;

  /* Under their own lock: the checkpoints and the marks of the blocks
   * changed since them (changes.h).
   */
  struct changes changes;

  /* Under start_lock, which serializes the first blk_set_size (or
   * blk_start_from_file): that call fixes the size and starts the
   * store (I/O: a kept file's header; a throw-away store's map of
   * slots); later calls only look, or check a base against a size
   * taken from the file.  base_met: a base of that size has been met.
   * store_overhead: the store's bytes besides blocks, set with the
   * size.
   */
  mutex_t start_lock;
  bool base_met;
  uint64_t store_overhead;

  /* Lets one flush of a kept store run at a time. */
  struct countedlock flush_lock;

  /* Atomic.  sized: set once, under start_lock, and read without it,
   * so that no one waits on the start's I/O to learn that it is not
   * done; once true, the size and the store are set.
   * copy_ups_resume: reads copy nothing up before this time
   * (monotonic_ns; 0: none), set when a read's copy-up found no room.
   */
  bool sized;
  uint64_t copy_ups_resume;

  /* Counted into without a lock: enum counter, and the waits for every
   * lock above by enum blk_lock.
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
