/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of backoff.h: the wait doubles from first after each
 * failure, and stays at its most for every number of failures past
 * that, up to the largest.
 */

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "backoff.h"

static int failed;

static void
expect (unsigned failures, uint64_t want)
{
  uint64_t got = backoff_delay (1000, failures, 6);

  if (got != want) {
    fprintf (stderr, "test-backoff: backoff_delay (1000, %u, 6) = %llu, "
             "expected %llu\n", failures, (unsigned long long) got,
             (unsigned long long) want);
    failed = 1;
  }
}

int
main (void)
{
  unsigned failures;

  expect (0, 1000);
  expect (1, 1000);
  expect (2, 2000);
  expect (6, 32000);
  expect (7, 64000);
  for (failures = 8; failures < 1000; ++failures)
    expect (failures, 64000);
  expect (UINT_MAX - 1, 64000);
  expect (UINT_MAX, 64000);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
