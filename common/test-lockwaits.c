/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of lockwaits.h: a free mutex counts no wait; a thread that
 * finds a mutex held for 50 ms counts one wait of at least a tenth of
 * that, for its kind only; waits handed over by a lock that times its
 * own are counted too, and a wait of 0 is none.
 */

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>

#include "lockwaits.h"

#define HOLD_NS 50000000

static pthread_mutex_t mutex = PTHREAD_MUTEX_INITIALIZER;
static struct lockwaits waits;
static atomic_bool waiting;
static int failed;

/* Locks mutex as kind 1, which the main thread holds. */
static void *
waiter (void *arg)
{
  (void) arg;
  waiting = true;
  lockwaits_lock (&waits, 1, &mutex);
  held_unlock (&mutex);
  return NULL;
}

static void
expect (unsigned kind, uint64_t want_waits, uint64_t min_ns, uint64_t max_ns)
{
  uint64_t n, ns;

  lockwaits_sum (&waits, kind, &n, &ns);
  if (n != want_waits || ns < min_ns || ns > max_ns) {
    fprintf (stderr, "test-lockwaits: kind %u: %llu waits, %llu ns\n", kind,
             (unsigned long long) n, (unsigned long long) ns);
    failed = 1;
  }
}

int
main (void)
{
  const struct timespec hold = { .tv_sec = 0, .tv_nsec = HOLD_NS };
  pthread_t thread;

  if (lockwaits_init (&waits, 3) == -1) {
    perror ("lockwaits_init");
    return EXIT_FAILURE;
  }
  lockwaits_lock (&waits, 0, &mutex);         /* free: no wait */
  if (lockwaits_try (&mutex)) {
    fprintf (stderr, "test-lockwaits: a held mutex taken again\n");
    failed = 1;
  }
  pthread_create (&thread, NULL, waiter, NULL);
  while (!waiting)
    sched_yield ();
  nanosleep (&hold, NULL);
  held_unlock (&mutex);                       /* the waiter goes on */
  pthread_join (thread, NULL);
  expect (0, 0, 0, 0);
  expect (1, 1, HOLD_NS / 10, UINT64_MAX);

  lockwaits_add (&waits, 2, 0);               /* no wait */
  lockwaits_add (&waits, 2, 1234);
  lockwaits_add (&waits, 2, 1);
  expect (2, 2, 1235, 1235);
  lockwaits_free (&waits);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
