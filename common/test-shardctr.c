/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of shardctr.h: counters stay apart, and adds from many
 * threads at once are all counted.
 */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "shardctr.h"

#define THREADS 8
#define ADDS 100000
#define COUNTERS 11             /* more than one cache line of cells */

static struct shardctr ctr;

static void
check (int ok, const char *what, unsigned i, unsigned long long got)
{
  if (!ok) {
    fprintf (stderr, "test-shardctr: %s (counter %u, got %llu)\n",
             what, i, got);
    exit (EXIT_FAILURE);
  }
}

/* Thread t adds 1 to counter 0, t to counter t, and 1000 to the last. */
static void *
adder (void *arg)
{
  unsigned t = (unsigned) (uintptr_t) arg, k;

  for (k = 0; k < ADDS; ++k) {
    shardctr_add (&ctr, 0, 1);
    shardctr_add (&ctr, t, t);
    shardctr_add (&ctr, COUNTERS - 1, 1000);
  }
  return NULL;
}

int
main (void)
{
  pthread_t threads[THREADS];
  uint64_t sum;
  unsigned i;

  check (shardctr_init (&ctr, COUNTERS) == 0, "init failed", 0, 0);
  for (i = 0; i < COUNTERS; ++i)
    check (shardctr_sum (&ctr, i) == 0, "not 0 at first", i,
           shardctr_sum (&ctr, i));

  for (i = 1; i <= THREADS; ++i)
    if (pthread_create (&threads[i - 1], NULL, adder,
                        (void *) (uintptr_t) i) != 0) {
      perror ("pthread_create");
      exit (EXIT_FAILURE);
    }
  for (i = 0; i < THREADS; ++i)
    pthread_join (threads[i], NULL);

  sum = shardctr_sum (&ctr, 0);
  check (sum == (uint64_t) THREADS * ADDS, "adds lost", 0, sum);
  for (i = 1; i < COUNTERS - 1; ++i) {
    uint64_t want = i <= THREADS ? (uint64_t) i * ADDS : 0;
    sum = shardctr_sum (&ctr, i);
    check (sum == want, "adds lost or leaked between counters", i, sum);
  }
  sum = shardctr_sum (&ctr, COUNTERS - 1);
  check (sum == (uint64_t) THREADS * ADDS * 1000, "large adds lost",
         COUNTERS - 1, sum);
  shardctr_free (&ctr);

  /* No counters at all is allowed. */
  check (shardctr_init (&ctr, 0) == 0, "init of 0 counters failed", 0, 0);
  shardctr_free (&ctr);
  return 0;
}
