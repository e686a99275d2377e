/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The thread that ends overlays whose clients have left (lifetime.h). */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <time.h>

#include <nbdkit-filter.h>

#include "lifetime.h"
#include "monotonic.h"

/* Protects stop and woken, which tell the thread to end or to call
 * end_due again; wake signals either.  Taken after overlays_lock
 * (lifetime_wake is called holding it), never before.
 */
static pthread_mutex_t lifetime_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake;                 /* on CLOCK_MONOTONIC */
static bool stop, woken;
static bool running;                        /* main thread only */
static pthread_t thread;
static lifetime_end_due *end_due;

/* Waits until due, woken or told to stop.  Requires lifetime_lock. */
static void
wait_until (uint64_t due)
{
  struct timespec ts = monotonic_timespec (due);

  while (!stop && !woken) {
    if (due == UINT64_MAX)
      pthread_cond_wait (&wake, &lifetime_lock);
    else if (pthread_cond_timedwait (&wake, &lifetime_lock, &ts) == ETIMEDOUT)
      return;
  }
}

static void *
lifetime_loop (void *arg)
{
  uint64_t due;

  pthread_mutex_lock (&lifetime_lock);
  while (!stop) {
    woken = false;
    pthread_mutex_unlock (&lifetime_lock);
    due = end_due (monotonic_ns ());
    pthread_mutex_lock (&lifetime_lock);
    wait_until (due);
  }
  pthread_mutex_unlock (&lifetime_lock);
  return NULL;
}

int
lifetime_start (lifetime_end_due *fn)
{
  int err;

  end_due = fn;
  monotonic_cond_init (&wake);
  err = pthread_create (&thread, NULL, lifetime_loop, NULL);
  if (err != 0) {
    errno = err;
    nbdkit_error ("cow-lifetime: cannot start a thread: %m");
    pthread_cond_destroy (&wake);
    return -1;
  }
  pthread_mutex_lock (&lifetime_lock);
  running = true;
  pthread_mutex_unlock (&lifetime_lock);
  return 0;
}

void
lifetime_wake (void)
{
  pthread_mutex_lock (&lifetime_lock);
  if (running) {
    woken = true;
    pthread_cond_signal (&wake);
  }
  pthread_mutex_unlock (&lifetime_lock);
}

void
lifetime_stop (void)
{
  pthread_mutex_lock (&lifetime_lock);
  if (!running) {
    pthread_mutex_unlock (&lifetime_lock);
    return;
  }
  stop = true;
  pthread_cond_signal (&wake);
  pthread_mutex_unlock (&lifetime_lock);
  pthread_join (thread, NULL);
  pthread_mutex_lock (&lifetime_lock);
  running = false;
  pthread_mutex_unlock (&lifetime_lock);
  pthread_cond_destroy (&wake);
}
