/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The slow path of timed_lock (timedlock.h). */

#include <config.h>

#include "monotonic.h"
#include "timedlock.h"

uint64_t
timed_lock_wait (pthread_mutex_t *mutex)
{
  uint64_t start = monotonic_ns (), waited;

  pthread_mutex_lock (mutex);
  waited = monotonic_ns () - start;
  return waited > 0 ? waited : 1;
}
