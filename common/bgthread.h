/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A background thread that calls one function, again and again: at
 * once when started, then whenever it is woken or the time that
 * function's last call named comes, until it is stopped.  The thread
 * knows nothing of what the function does (ending overlays, writing a
 * report).
 *
 *   static struct bgthread t = BGTHREAD_INIT;
 *   bgthread_start (&t, fn, opaque);   // after nbdkit has forked
 *   bgthread_wake (&t);                // from any thread
 *   bgthread_stop (&t);                // joins it
 */

#ifndef COMMON_BGTHREAD_H
#define COMMON_BGTHREAD_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tsa.h"

/* Does the thread's work at now (monotonic nanoseconds) and returns
 * when it is next due, or UINT64_MAX for "only when woken".
 */
typedef uint64_t bgthread_fn (uint64_t now, void *opaque);

struct bgthread {
  /* Protects running, stop and woken; wake signals a change of stop
   * or woken.  Nothing is taken inside it; it may be taken inside any
   * other lock (bgthread_wake is called holding the caller's).
   */
  mutex_t lock;
  pthread_cond_t wake;          /* on CLOCK_MONOTONIC */
  bool running FIELD_GUARDED_BY (lock);  /* set and cleared by the owner */
  bool stop FIELD_GUARDED_BY (lock);
  bool woken FIELD_GUARDED_BY (lock);
  pthread_t thread;
  bgthread_fn *fn;
  void *opaque;
};

#define BGTHREAD_INIT { .lock = PTHREAD_MUTEX_INITIALIZER }

/* Starts the thread, its first call of fn at once.  Returns 0, or -1
 * with errno set.
 */
extern int bgthread_start (struct bgthread *t, bgthread_fn *fn, void *opaque);

/* Makes the thread call fn again now.  Does nothing if it does not run.
 */
extern void bgthread_wake (struct bgthread *t);

/* Stops the thread, if it runs, and waits for it to end: a call of fn
 * under way is finished first.
 */
extern void bgthread_stop (struct bgthread *t);

#endif /* COMMON_BGTHREAD_H */
