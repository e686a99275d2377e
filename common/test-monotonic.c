/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of monotonic.h: it never goes back, and it advances by at
 * least the time slept, in nanoseconds; a timed wait on its condition
 * variable ends at the time given on that clock, not before.
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "monotonic.h"

int
main (void)
{
  const struct timespec ten_ms = { .tv_sec = 0, .tv_nsec = 10000000 };
  uint64_t before, after;
  unsigned i;

  before = monotonic_ns ();
  for (i = 0; i < 100000; ++i) {
    after = monotonic_ns ();
    if (after < before) {
      fprintf (stderr, "test-monotonic: went back from %llu to %llu\n",
               (unsigned long long) before, (unsigned long long) after);
      return EXIT_FAILURE;
    }
    before = after;
  }
  nanosleep (&ten_ms, NULL);
  after = monotonic_ns ();
  if (after - before < 10000000) {
    fprintf (stderr, "test-monotonic: 10 ms sleep measured as %llu ns\n",
             (unsigned long long) (after - before));
    return EXIT_FAILURE;
  }

  pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t cond;
  struct timespec due;
  int err;

  if (monotonic_cond_init (&cond) != 0) {
    fprintf (stderr, "test-monotonic: monotonic_cond_init failed\n");
    return EXIT_FAILURE;
  }
  before = monotonic_ns ();
  due = monotonic_timespec (before + 20000000);
  pthread_mutex_lock (&lock);
  do
    err = pthread_cond_timedwait (&cond, &lock, &due);
  while (err == 0);
  pthread_mutex_unlock (&lock);
  after = monotonic_ns ();
  if (err != ETIMEDOUT || after - before < 20000000 ||
      after - before > 5000000000) {
    fprintf (stderr, "test-monotonic: a 20 ms timed wait: error %d after "
             "%llu ns\n", err, (unsigned long long) (after - before));
    return EXIT_FAILURE;
  }
  pthread_cond_destroy (&cond);
  return EXIT_SUCCESS;
}
