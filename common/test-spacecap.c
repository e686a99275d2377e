/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of spacecap.h: takes past the limit fail and change
 * nothing, and threads racing to take and give never push the bytes
 * taken past the limit, nor lose any.
 */

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "spacecap.h"

#define THREADS 8
#define ROUNDS 200000
#define LIMIT 1000

static struct spacecap cap;
static unsigned long over_limit;    /* times a thread saw used > LIMIT */

static void
check (int ok, const char *what)
{
  if (!ok) {
    fprintf (stderr, "test-spacecap: %s\n", what);
    exit (EXIT_FAILURE);
  }
}

/* Takes 1 to 64 bytes, checks the total, gives them back. */
static void *
racer (void *arg)
{
  unsigned seed = (unsigned) (uintptr_t) arg, k;

  for (k = 0; k < ROUNDS; ++k) {
    uint64_t n = 1 + rand_r (&seed) % 64;
    if (!spacecap_take (&cap, n))
      continue;
    if (spacecap_used (&cap) > LIMIT)
      __atomic_fetch_add (&over_limit, 1, __ATOMIC_RELAXED);
    spacecap_give (&cap, n);
  }
  return NULL;
}

int
main (void)
{
  pthread_t threads[THREADS];
  uintptr_t t;

  spacecap_init (&cap, 100);
  check (spacecap_take (&cap, 60), "take within the limit");
  check (!spacecap_take (&cap, 41), "take past the limit succeeded");
  check (spacecap_used (&cap) == 60, "a failed take changed the total");
  check (spacecap_take (&cap, 40), "take up to the limit");
  check (!spacecap_take (&cap, 1), "take of a full budget succeeded");
  spacecap_give (&cap, 50);
  check (spacecap_take (&cap, 50), "take after a give");
  check (!spacecap_take (&cap, UINT64_MAX), "a huge take wrapped around");
  spacecap_charge (&cap, 30);
  check (spacecap_used (&cap) == 130, "a charge past the limit");
  check (!spacecap_take (&cap, 1), "take while over the limit");

  spacecap_init (&cap, 100);
  check (spacecap_take_leaving (&cap, 60, 40), "take leaving the rest");
  check (!spacecap_take_leaving (&cap, 1, 40), "take into what is left");
  check (spacecap_take (&cap, 40), "a plain take of what was left");
  spacecap_give (&cap, 100);
  check (!spacecap_take_leaving (&cap, 0, 101), "leaving more than the limit");
  check (!spacecap_take_leaving (&cap, UINT64_MAX, 1), "a huge take leaving");
  check (spacecap_used (&cap) == 0, "a failed take leaving changed the total");

  spacecap_init (&cap, SPACECAP_NO_LIMIT);
  check (spacecap_take (&cap, UINT64_MAX / 2), "take with no limit");

  spacecap_init (&cap, LIMIT);
  for (t = 0; t < THREADS; ++t)
    pthread_create (&threads[t], NULL, racer, (void *) (t + 1));
  for (t = 0; t < THREADS; ++t)
    pthread_join (threads[t], NULL);
  check (over_limit == 0, "racing takes passed the limit");
  check (spacecap_used (&cap) == 0, "racing takes and gives lost bytes");
  printf ("test-spacecap: ok\n");
  return 0;
}
