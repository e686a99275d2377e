/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of iszero.h: every size up to a few vectors, a non-zero
 * byte at every position, and a large buffer.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iszero.h"

static void
check (int ok, const char *what, size_t size, size_t pos)
{
  if (!ok) {
    fprintf (stderr, "test-iszero: %s (size %zu, position %zu)\n",
             what, size, pos);
    exit (EXIT_FAILURE);
  }
}

int
main (void)
{
  static char buf[65536 + 1];
  size_t size, pos;

  for (size = 0; size <= 200; ++size) {
    check (is_zero (buf, size), "zeros taken for data", size, 0);
    for (pos = 0; pos < size; ++pos) {
      buf[pos] = 1;
      check (!is_zero (buf, size), "data taken for zeros", size, pos);
      buf[pos] = 0;
    }
    /* A byte just past the end does not count. */
    buf[size] = 1;
    check (is_zero (buf, size), "looked past the end", size, size);
    buf[size] = 0;
  }
  size = sizeof buf - 1;
  check (is_zero (buf, size), "large zeros taken for data", size, 0);
  for (pos = 0; pos < size; pos += 4093) {
    buf[pos] = (char) 0x80;
    check (!is_zero (buf, size), "large data taken for zeros", size, pos);
    buf[pos] = 0;
  }
  buf[size - 1] = 1;
  check (!is_zero (buf, size), "last byte missed", size, size - 1);
  return EXIT_SUCCESS;
}
