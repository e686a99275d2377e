/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* Locking a mutex and learning how long the caller waited for it, for
 * the lock statistics (docs/design.md, "Statistics").  An uncontended
 * lock costs one trylock and no clock reads.
 */

#ifndef COMMON_TIMEDLOCK_H
#define COMMON_TIMEDLOCK_H

#include <pthread.h>
#include <stdint.h>

#include "monotonic.h"

/* Lock mutex.  Returns 0 if it was free, else the nanoseconds waited,
 * at least 1 so that every wait counts however short it was.
 */
static inline uint64_t
timed_lock (pthread_mutex_t *mutex)
{
  uint64_t start, waited;

  if (pthread_mutex_trylock (mutex) == 0)
    return 0;
  start = monotonic_ns ();
  pthread_mutex_lock (mutex);
  waited = monotonic_ns () - start;
  return waited > 0 ? waited : 1;
}

#endif /* COMMON_TIMEDLOCK_H */
