/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The rank of each of the filter's locks, the lock order of
 * docs/design.md as numbers: a thread takes a lock only while every
 * lock it holds has a lower rank, and locks of one rank are never held
 * together but the stripes' write locks.  Each lock is given its rank
 * where it is made; checked builds abort on a lock taken out of rank
 * (checks.h), and tests/test-lock-ranks.sh compares these with the
 * order design.md draws.  The locks not named here (a background
 * thread's, a range lock's list, the fill's pace_lock, nbdcow's copy)
 * hold nothing inside them: CHECKS_RANK_LEAF.
 */

#ifndef COW_LOCKRANKS_H
#define COW_LOCKRANKS_H

#include "checks.h"

enum lock_rank {
  LOCK_RANK_OVERLAYS = 1,               /* overlays_lock */
  LOCK_RANK_GATE = 1,                   /* gate */
  LOCK_RANK_OPEN = 1,                   /* open_lock */
  LOCK_RANK_FLUSH = 2,                  /* flush_lock */
  LOCK_RANK_RMW = 2,                    /* rmw_locks */
  LOCK_RANK_START = 2,                  /* start_lock */
  LOCK_RANK_STRIPES = 3 | CHECKS_RANK_SEVERAL, /* write locks of the stripes */
  LOCK_RANK_PAGE = 4,                   /* page_lock */
  LOCK_RANK_STALE = 4,                  /* stale_lock */
  LOCK_RANK_SLOT = 4,                   /* slot_lock */
  LOCK_RANK_LOG = 4,                    /* log_lock */
  LOCK_RANK_WATCH = 5,                  /* watch_lock */
  LOCK_RANK_SLOTS = 5,                  /* slots_lock */
  LOCK_RANK_STATE = 6,                  /* state_lock */
  LOCK_RANK_BASE_MAP = 6,               /* base_map_lock */
  LOCK_RANK_CHANGES = 6,                /* lock of the changes */
  LOCK_RANK_CALL = 7,                   /* call lock of a shared context */
  LOCK_RANK_INTERNS = 8,                /* interns_lock */
};

#endif /* COW_LOCKRANKS_H */
