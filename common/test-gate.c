/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of gate.h: many threads pass at once, a closer waits for
 * those inside and keeps new ones out until it opens, and a closer
 * gets through a stream of passers that never stops.
 */

#include <config.h>

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "gate.h"

#define MS 1000000L

static struct gate gate;
static atomic_int inside, closed_seen, stop;

static void
sleep_ns (long ns)
{
  struct timespec ts = { .tv_sec = 0, .tv_nsec = ns };
  nanosleep (&ts, NULL);
}

#define FAIL(...) \
  do { fprintf (stderr, "test-gate: " __VA_ARGS__); exit (EXIT_FAILURE); } \
  while (0)

/* Passes again and again, each time for 1 ms, until stop. */
static void *
passer (void *arg)
{
  atomic_int *passes = arg;

  while (!stop) {
    gate_enter (&gate);
    if (closed_seen)
      FAIL ("a thread passed while the gate was closed\n");
    ++inside;
    sleep_ns (MS);
    --inside;
    gate_leave (&gate);
    ++*passes;
  }
  return NULL;
}

int
main (void)
{
  pthread_t threads[4];
  atomic_int passes[4] = { 0 };
  int i, n, both = 0;

  if (gate_init (&gate, 1) == -1)
    FAIL ("gate_init failed\n");

  /* Two threads inside at once. */
  for (i = 0; i < 4; ++i)
    pthread_create (&threads[i], NULL, passer, &passes[i]);
  for (n = 0; n < 1000 && !both; ++n) {
    both = inside >= 2;
    sleep_ns (MS / 10);
  }
  if (!both)
    FAIL ("never two threads inside at once\n");

  /* Each close gets through the stream, with no one inside. */
  for (n = 0; n < 20; ++n) {
    gate_close (&gate);
    if (inside != 0)
      FAIL ("closed with %d threads inside\n", (int) inside);
    closed_seen = 1;
    sleep_ns (2 * MS);
    closed_seen = 0;
    gate_open (&gate);
    sleep_ns (MS);
  }
  stop = 1;
  for (i = 0; i < 4; ++i) {
    pthread_join (threads[i], NULL);
    if (passes[i] == 0)
      FAIL ("thread %d never passed\n", i);
  }
  gate_destroy (&gate);
  return EXIT_SUCCESS;
}
