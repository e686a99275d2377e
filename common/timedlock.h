/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Locking a mutex and learning how long the caller waited for it, for
 * the lock statistics (docs/design.md, "Statistics").  An uncontended
 * lock costs one trylock and no clock reads.
 */

#ifndef COMMON_TIMEDLOCK_H
#define COMMON_TIMEDLOCK_H

#include <pthread.h>
#include <stdint.h>

#include "tsa.h"

/* The wait of timed_lock: locks mutex, reading the clock around it.
 * Out of line (timedlock.c), so that the callers' loops keep nothing
 * of it in their registers.
 */
extern uint64_t timed_lock_wait (mutex_t *mutex) ACQUIRE (*mutex);

/* Lock mutex.  Returns 0 if it was free, else the nanoseconds waited,
 * at least 1 so that every wait counts however short it was.
 */
static inline uint64_t
timed_lock (mutex_t *mutex) ACQUIRE (*mutex) NO_TSA
{
  if (pthread_mutex_trylock (mutex) == 0)
    return 0;
  return timed_lock_wait (mutex);
}

#endif /* COMMON_TIMEDLOCK_H */
