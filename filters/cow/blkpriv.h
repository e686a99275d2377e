/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The block layer's own state, shared by its two files and nothing
 * else: blk.c, the requests and the state machine they follow, and
 * blklife.c, an overlay made, sized, flushed and freed, and its
 * statistics.  docs/design.md says what each lock protects.
 */

#ifndef COW_BLKPRIV_H
#define COW_BLKPRIV_H

#include <pthread.h>
#include <stdint.h>

#include "basemap.h"
#include "blklock.h"
#include "blkmap.h"
#include "rangelock.h"
#include "shardctr.h"
#include "space.h"
#include "store.h"

struct blk {
  /* The data of allocated blocks (store.h), and the write locks of its
   * stripes, held over every system call that writes it.  The kernel
   * serializes the writes of one file anyway (the inode lock), but its
   * waiters spin, which on few cores starved the threads doing useful
   * work; a mutex waits asleep.  A fast-path write also holds the locks
   * of its range over its state lookup (write_allocated).
   */
  struct store *store;

  /* The geometry and the state of every block, under state_lock. */
  struct blkmap map;

  /* What the base's extents told, under its own lock (basemap.h). */
  struct basemap base_map;

  struct rangelock rmw_locks;   /* state changes and their I/O, by block */

  /* Lets one flush of a kept store run at a time. */
  pthread_mutex_t flush_lock;

  /* The disk space counted against cow-max-size, the server's. */
  struct space *space;

  /* Statistics: enum counter, added to without any lock. */
  struct shardctr counters;
};

/*----------------------------------------------------------------------
 * Counters and timed locks, for the statistics.  Counting must add no
 * contention to the request path: the counters are sharded by thread
 * (common/shardctr.h), and each lock is tried first, so only a thread
 * that has to wait anyway reads the clock.
 */

enum counter {
  COPY_UPS_READ,                /* blocks, see struct blk_stats */
  COPY_UPS_CACHE,
  COPY_UPS_RMW,
  BASE_READS,
  BASE_READ_BYTES,
  LOCK_WAITS,                   /* one per enum blk_lock from here */
  LOCK_WAIT_NS = LOCK_WAITS + BLK_LOCKS,
  COUNTERS = LOCK_WAIT_NS + BLK_LOCKS
};

static inline void
stat_add (struct blk *blk, enum counter counter, uint64_t n)
{
  shardctr_add (&blk->counters, counter, n);
}

static inline void
count_wait (struct blk *blk, enum blk_lock lock, uint64_t ns)
{
  stat_add (blk, LOCK_WAITS + lock, 1);
  stat_add (blk, LOCK_WAIT_NS + lock, ns);
}

#endif /* COW_BLKPRIV_H */
