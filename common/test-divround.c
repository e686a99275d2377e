/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of divround.h: exact multiples, one more, zero, and the
 * largest value, where a + b - 1 would overflow.
 */

#include <stdio.h>
#include <stdlib.h>

#include "divround.h"

static int failed;

static void
expect (uint64_t a, uint64_t b, uint64_t want)
{
  uint64_t got = div_round_up (a, b);

  if (got != want) {
    fprintf (stderr, "test-divround: div_round_up (%llu, %llu) = %llu, "
             "expected %llu\n", (unsigned long long) a, (unsigned long long) b,
             (unsigned long long) got, (unsigned long long) want);
    failed = 1;
  }
}

int
main (void)
{
  expect (0, 4096, 0);
  expect (1, 4096, 1);
  expect (4096, 4096, 1);
  expect (4097, 4096, 2);
  expect (8192, 512, 16);
  expect (UINT64_MAX, 1, UINT64_MAX);
  expect (UINT64_MAX, 2, UINT64_MAX / 2 + 1);
  expect (UINT64_MAX, UINT64_MAX, 1);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
