/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The slow path of timed_lock (timedlock.h). */

#include <config.h>

#include "monotonic.h"
#include "timedlock.h"

/* pthread_mutex_lock takes the lock unseen by the analysis. */
uint64_t
timed_lock_wait (mutex_t *mutex) NO_TSA
{
  uint64_t start = monotonic_ns (), waited;

  pthread_mutex_lock (mutex);
  waited = monotonic_ns () - start;
  return waited > 0 ? waited : 1;
}
