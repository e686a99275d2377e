/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The monotonic clock in nanoseconds, for timing waits and intervals:
 * unaffected by changes of the wall clock, and a plain integer that
 * differences and sums of waits need.
 */

#ifndef COMMON_MONOTONIC_H
#define COMMON_MONOTONIC_H

#include <stdint.h>
#include <time.h>

static inline uint64_t
monotonic_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif /* COMMON_MONOTONIC_H */
