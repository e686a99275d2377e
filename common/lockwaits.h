/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The waits for a set of locks, by kind: how many times a thread had
 * to wait for a lock of each kind and for how long, the one way the
 * block layer counts them for its statistics (docs/design.md,
 * "Statistics without contention").  Counting adds no contention: the
 * counters are sharded by thread (shardctr.h), and a mutex is tried
 * first, so a lock taken without waiting reads no clock and counts
 * nothing.  A lock that times its own waits (rangelock.h, stripes.h)
 * hands them to lockwaits_add.
 *
 * Taking a mutex here also tells checks.h that the thread holds it, in
 * checked builds; held_unlock (checks.h) lets go of it.
 */

#ifndef COMMON_LOCKWAITS_H
#define COMMON_LOCKWAITS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "checks.h"
#include "shardctr.h"
#include "timedlock.h"

struct lockwaits {
  struct shardctr counters;     /* per kind: waits, then nanoseconds */
};

/* Counters for kinds kinds of locks, all 0.  Returns 0, or -1 with
 * errno set.
 */
extern int lockwaits_init (struct lockwaits *w, unsigned kinds);
extern void lockwaits_free (struct lockwaits *w);

/* Counts a wait of ns nanoseconds for a lock of kind kind; ns 0 is no
 * wait and counts nothing.
 */
static inline void
lockwaits_add (struct lockwaits *w, unsigned kind, uint64_t ns)
{
  if (ns) {
    shardctr_add (&w->counters, 2 * kind, 1);
    shardctr_add (&w->counters, 2 * kind + 1, ns);
  }
}

/* Tries mutex: returns true if it is now held, without waiting. */
static inline bool
lockwaits_try (mutex_t *mutex) TRY_ACQUIRE (true, *mutex) NO_TSA
{
  if (pthread_mutex_trylock (mutex) != 0)
    return false;
  held_add (mutex);
  return true;
}

/* Locks mutex, a lock of kind kind that lockwaits_try found taken,
 * and counts the wait.  Out of line: a lock taken at once costs its
 * callers only the try, and a caller whose counters sit behind a
 * pointer reads the pointer only when it waits.
 */
extern void lockwaits_wait (struct lockwaits *w, unsigned kind,
                            mutex_t *mutex) ACQUIRE (*mutex);

/* Locks mutex, a lock of kind kind, counting the wait if there was
 * one.
 */
static inline void
lockwaits_lock (struct lockwaits *w, unsigned kind, mutex_t *mutex)
  ACQUIRE (*mutex)
{
  if (!lockwaits_try (mutex))
    lockwaits_wait (w, kind, mutex);
}

/* A mutex counted as one kind of a set: a lock of the block layer
 * (state_lock, base_map_lock, flush_lock), taken and let go of only
 * through countedlock_lock and countedlock_unlock.
 */
struct CAPABILITY ("mutex") countedlock {
  mutex_t mutex;
  struct lockwaits *waits;
  unsigned kind;
};

/* l, of kind kind and rank rank (checks.h). */
extern void countedlock_init (struct countedlock *l, struct lockwaits *w,
                              unsigned kind, unsigned rank);
extern void countedlock_destroy (struct countedlock *l);

/* The analysis sees l, not its mutex. */
static inline void
countedlock_lock (struct countedlock *l) ACQUIRE (*l) NO_TSA
{
  lockwaits_lock (l->waits, l->kind, &l->mutex);
}

static inline void
countedlock_unlock (struct countedlock *l) RELEASE (*l) NO_TSA
{
  held_unlock (&l->mutex);
}

/* Whether the calling thread holds l, in checked builds (checks.h). */
static inline bool
countedlock_held (struct countedlock *l)
{
  return held_by_me (&l->mutex);
}

/* The waits for locks of kind kind so far, and their nanoseconds. */
extern void lockwaits_sum (const struct lockwaits *w, unsigned kind,
                           uint64_t *waits, uint64_t *ns);

#endif /* COMMON_LOCKWAITS_H */
