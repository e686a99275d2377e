/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of timedlock.h: a free mutex reports no wait; a mutex held
 * by another thread for 100 ms reports a wait of at least a tenth of that, and
 * the caller holds the mutex afterwards.
 */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "timedlock.h"

#define HOLD_NS 100000000

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t started_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t started_cond = PTHREAD_COND_INITIALIZER;
static int started;

/* Holds mutex for HOLD_NS, saying when it has it. */
static void *
holder (void *arg)
{
  const struct timespec hold = { .tv_sec = 0, .tv_nsec = HOLD_NS };

  (void) arg;
  pthread_mutex_lock (&mutex);
  pthread_mutex_lock (&started_lock);
  started = 1;
  pthread_cond_signal (&started_cond);
  pthread_mutex_unlock (&started_lock);
  nanosleep (&hold, NULL);
  pthread_mutex_unlock (&mutex);
  return NULL;
}

int
main (void)
{
  pthread_t thread;
  uint64_t waited;

  waited = timed_lock (&mutex);
  if (waited != 0) {
    fprintf (stderr, "test-timedlock: a free mutex reported %llu ns\n",
             (unsigned long long) waited);
    return EXIT_FAILURE;
  }
  pthread_mutex_unlock (&mutex);

  pthread_create (&thread, NULL, holder, NULL);
  pthread_mutex_lock (&started_lock);
  while (!started)
    pthread_cond_wait (&started_cond, &started_lock);
  pthread_mutex_unlock (&started_lock);

  waited = timed_lock (&mutex);
  /* The holder sleeps 100 ms after saying it holds the lock; allow most
   * of that for a slow machine between its signal and our trylock.
   */
  if (waited < HOLD_NS / 10) {
    fprintf (stderr, "test-timedlock: a 100 ms hold reported %llu ns\n",
             (unsigned long long) waited);
    return EXIT_FAILURE;
  }
  if (pthread_mutex_trylock (&mutex) == 0) {
    fprintf (stderr, "test-timedlock: timed_lock left the mutex free\n");
    return EXIT_FAILURE;
  }
  pthread_mutex_unlock (&mutex);
  pthread_join (thread, NULL);
  return EXIT_SUCCESS;
}
