/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A lock on ranges of blocks: a thread locking [first, first+n) waits
 * only for ranges that truly overlap it, however far apart or close
 * together the ranges are.
 *
 * Why not a table of per-block locks: a table of S slots gives ranges
 * more than S blocks long, or S blocks apart, shared slots.  With 4K
 * blocks and 1024 slots, sixteen 1M writes in flight (one fio job)
 * met in the slots although no two of them touched the same block,
 * and ran slower than serialized (docs/performance.md).
 *
 * One mutex guards a list of the ranges locked or waiting, in the
 * order they arrived.  A newcomer counts the ranges ahead of it that
 * overlap it (its blockers) and sleeps on its own condition variable
 * until that count is zero; unlocking a range decrements the count of
 * every later range overlapping it and wakes those reaching zero.
 *
 * Why this is correct and fair:
 *  - Exclusion: of two overlapping ranges the later counts the earlier
 *    as a blocker and waits until it is unlocked.
 *  - No deadlock: a range waits only for ranges ahead of it, so the
 *    first range in the list never waits.
 *  - No starvation: overlapping ranges are granted in arrival order.
 *    The price is that a waiting range also holds back later ranges
 *    that overlap it, even ones that overlap nothing granted.
 *  - Each waiter is woken exactly once, when it may go: no thundering
 *    herd across the many threads of a multi-connection client.
 *  - The mutex is held only over the list walk, never across the
 *    caller's I/O, so the lock stays within ThreadSanitizer's limit of
 *    64 held mutexes and costs a short critical section per request.
 *
 * Rules for callers: hold at most one range at a time, and unlock it
 * with the same struct rangelock_range that locked it (it lives in the
 * list meanwhile, typically on the caller's stack).
 */

#ifndef COMMON_RANGELOCK_H
#define COMMON_RANGELOCK_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tsa.h"

struct rangelock_range {
  uint64_t first, end;          /* blocks [first, end) */
  unsigned blockers;            /* overlapping ranges ahead in the list */
  pthread_cond_t unblocked;     /* signalled when blockers reaches 0 */
  struct rangelock_range *prev, *next;
#ifdef COW_CHECKS
  pthread_t owner;              /* the thread that locked it */
#endif
};

/* One capability for the analysis (tsa.h): a function that REQUIRES
 * (locks) holds a range of them covering what it works on.
 */
struct CAPABILITY ("range lock") rangelock {
  mutex_t lock;                 /* protects the list and its entries */
  struct rangelock_range *head, *tail;   /* in arrival order */
};

/* The ranges are of rank rank (checks.h). */
extern void rangelock_init (struct rangelock *locks, unsigned rank);
extern void rangelock_destroy (struct rangelock *locks);

/* Locks blocks [first, first+n), n >= 1, waiting for overlapping
 * ranges locked or requested before.  *range records the lock until
 * rangelock_unlock.  Returns how many nanoseconds it waited for them:
 * 0 if none was ahead (the clock is read only when one was), so that
 * callers can report lock contention at no cost without it.
 */
extern uint64_t rangelock_lock (struct rangelock *locks,
                                struct rangelock_range *range,
                                uint64_t first, uint64_t n) ACQUIRE (*locks);

extern void rangelock_unlock (struct rangelock *locks,
                              struct rangelock_range *range)
  RELEASE (*locks);

/* Whether the calling thread holds a range covering [first, first+n),
 * in checked builds (checks.h); true otherwise.
 */
extern bool rangelock_held (struct rangelock *locks, uint64_t first,
                            uint64_t n);

#endif /* COMMON_RANGELOCK_H */
