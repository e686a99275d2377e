/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The locks of the block layer whose waits the statistics time
 * (cow-stats=FILE; docs/design.md says how they are kept cheap and
 * what each lock protects).
 */

#ifndef COW_BLKLOCK_H
#define COW_BLKLOCK_H

enum blk_lock {
  BLK_LOCK_RMW,                 /* rmw_locks */
  BLK_LOCK_STATE,               /* state_lock */
  BLK_LOCK_WRITE,               /* the stripes' write locks */
  BLK_LOCK_FLUSH,               /* flush_lock */
  BLK_LOCK_BASE_MAP,            /* base_map_lock (basemap.h) */
  BLK_LOCKS
};

#endif /* COW_BLKLOCK_H */
