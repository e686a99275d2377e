/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The background thread (bgthread.h). */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "bgthread.h"
#include "checks.h"
#include "monotonic.h"

/* Waits until due, woken or told to stop. */
static void
wait_until (struct bgthread *t, uint64_t due) REQUIRES (t->lock)
{
  struct timespec ts = monotonic_timespec (due);

  while (!t->stop && !t->woken) {
    if (due == UINT64_MAX)
      pthread_cond_wait (&t->wake, &t->lock);
    else if (pthread_cond_timedwait (&t->wake, &t->lock, &ts) == ETIMEDOUT)
      return;
  }
}

static void *
loop (void *arg)
{
  struct bgthread *t = arg;
  uint64_t due;

  held_lock (&t->lock);
  while (!t->stop) {
    t->woken = false;
    held_unlock (&t->lock);
    due = t->fn (monotonic_ns (), t->opaque);
    held_lock (&t->lock);
    wait_until (t, due);
  }
  held_unlock (&t->lock);
  return NULL;
}

int
bgthread_start (struct bgthread *t, bgthread_fn *fn, void *opaque)
{
  int err;

  t->fn = fn;
  t->opaque = opaque;
  t->stop = t->woken = false;
  err = monotonic_cond_init (&t->wake);
  if (err == 0) {
    err = pthread_create (&t->thread, NULL, loop, t);
    if (err != 0)
      pthread_cond_destroy (&t->wake);
  }
  if (err != 0) {
    errno = err;
    return -1;
  }
  held_lock (&t->lock);
  t->running = true;
  held_unlock (&t->lock);
  return 0;
}

void
bgthread_wake (struct bgthread *t)
{
  held_lock (&t->lock);
  if (t->running) {
    t->woken = true;
    pthread_cond_signal (&t->wake);
  }
  held_unlock (&t->lock);
}

void
bgthread_stop (struct bgthread *t)
{
  held_lock (&t->lock);
  if (!t->running) {
    held_unlock (&t->lock);
    return;
  }
  t->stop = true;
  pthread_cond_signal (&t->wake);
  held_unlock (&t->lock);
  pthread_join (t->thread, NULL);
  held_lock (&t->lock);
  t->running = false;
  held_unlock (&t->lock);
  pthread_cond_destroy (&t->wake);
}
