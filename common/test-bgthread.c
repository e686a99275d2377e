/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of bgthread.h: the first call comes at once, a wake brings
 * another, the time a call names brings the next without a wake, a
 * stop waits for a call under way and no call comes after it, and
 * waking or stopping a thread that does not run does nothing.
 */

#include <config.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bgthread.h"
#include "monotonic.h"

#define MS 1000000ULL

static atomic_uint calls;
static atomic_bool in_call;
static _Atomic uint64_t next_in;     /* ns after now for the next call */
static _Atomic uint64_t call_ns;     /* how long a call takes */

static uint64_t
fn (uint64_t now, void *opaque)
{
  uint64_t in = next_in, ns = call_ns;

  in_call = true;
  if (ns) {
    struct timespec ts = { .tv_sec = 0, .tv_nsec = ns };
    nanosleep (&ts, NULL);
  }
  ++calls;
  in_call = false;
  return in == UINT64_MAX ? UINT64_MAX : now + in;
}

static void
fail (const char *what)
{
  fprintf (stderr, "test-bgthread: %s (calls %u)\n", what, calls);
  exit (EXIT_FAILURE);
}

/* Waits up to 5 s for calls to reach n. */
static void
wait_calls (unsigned n, const char *what)
{
  uint64_t until = monotonic_ns () + 5000 * MS;

  while (calls < n)
    if (monotonic_ns () > until)
      fail (what);
}

int
main (void)
{
  static struct bgthread t = BGTHREAD_INIT;
  uint64_t start;
  unsigned n;

  bgthread_wake (&t);
  bgthread_stop (&t);
  if (calls != 0)
    fail ("a thread that never ran was called");

  next_in = UINT64_MAX;
  if (bgthread_start (&t, fn, NULL) == -1)
    fail ("cannot start");
  wait_calls (1, "no call at start");
  bgthread_wake (&t);
  wait_calls (2, "a wake brought no call");

  /* The time a call names brings the next one, without a wake. */
  next_in = 50 * MS;
  bgthread_wake (&t);
  wait_calls (3, "no call after the wake");
  start = monotonic_ns ();
  wait_calls (5, "the named time brought no call");
  if (monotonic_ns () - start < 50 * MS)
    fail ("called before the time named");

  /* A stop waits for the call under way; none comes after. */
  next_in = UINT64_MAX;
  call_ns = 100 * MS;
  bgthread_wake (&t);
  while (!in_call)
    ;
  bgthread_stop (&t);
  if (in_call)
    fail ("stopped during a call");
  n = calls;
  bgthread_wake (&t);
  bgthread_stop (&t);
  {
    struct timespec ts = { .tv_sec = 0, .tv_nsec = 100 * MS };
    nanosleep (&ts, NULL);
  }
  if (calls != n)
    fail ("called after the stop");

  /* It starts again. */
  call_ns = 0;
  if (bgthread_start (&t, fn, NULL) == -1)
    fail ("cannot start again");
  wait_calls (n + 1, "no call at the second start");
  bgthread_stop (&t);
  printf ("test-bgthread: %u calls\n", calls);
  return EXIT_SUCCESS;
}
