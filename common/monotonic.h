/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The monotonic clock in nanoseconds, for timing waits and intervals:
 * unaffected by changes of the wall clock, and a plain integer that
 * differences and sums of waits need; and condition variables whose
 * timed waits count on it.
 */

#ifndef COMMON_MONOTONIC_H
#define COMMON_MONOTONIC_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t
monotonic_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A condition variable whose pthread_cond_timedwait takes a time of
 * the monotonic clock.  Returns 0 or an error number.
 */
static inline int
monotonic_cond_init (pthread_cond_t *cond)
{
  pthread_condattr_t attr;
  int err;

  pthread_condattr_init (&attr);
  pthread_condattr_setclock (&attr, CLOCK_MONOTONIC);
  err = pthread_cond_init (cond, &attr);
  pthread_condattr_destroy (&attr);
  return err;
}

/* ns of the monotonic clock as pthread_cond_timedwait takes it. */
static inline struct timespec
monotonic_timespec (uint64_t ns)
{
  struct timespec ts = {
    .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000
  };
  return ts;
}

#endif /* COMMON_MONOTONIC_H */
