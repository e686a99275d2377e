/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of scratch.h: reuse, a second buffer while the first is
 * out, oversized requests, and freeing at thread exit (run it under
 * valgrind or ASan to see that nothing leaks).
 */

#include <config.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scratch.h"

static void
check (int ok, const char *what)
{
  if (!ok) {
    fprintf (stderr, "test-scratch: %s\n", what);
    exit (EXIT_FAILURE);
  }
}

static void *
thread_body (void *arg)
{
  void *a, *b, *big;

  (void) arg;
  a = scratch_get (100000);
  check (a != NULL, "scratch_get");
  memset (a, 1, 100000);
  b = scratch_get (100);
  check (b != NULL && b != a, "second buffer while the first is out");
  memset (b, 2, 100);
  scratch_put (b);
  scratch_put (a);

  check (scratch_get (50000) == a, "the cached buffer is reused");
  scratch_put (a);
  a = scratch_get (300000);             /* grows the cached buffer */
  check (a != NULL, "growing");
  memset (a, 3, 300000);
  scratch_put (a);

  big = scratch_get (SCRATCH_KEEP + 1);
  check (big != NULL && big != a, "oversized requests are not cached");
  scratch_put (big);
  check (scratch_get (1) == a, "oversized requests leave the cache alone");
  scratch_put (a);
  scratch_put (NULL);
  return NULL;
}

int
main (void)
{
  pthread_t t[4];
  int i;

  for (i = 0; i < 4; ++i)
    check (pthread_create (&t[i], NULL, thread_body, NULL) == 0,
           "pthread_create");
  for (i = 0; i < 4; ++i)
    pthread_join (t[i], NULL);
  return 0;
}
