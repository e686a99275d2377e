/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of ispowerof2.h. */

#include <stdio.h>
#include <stdlib.h>

#include "ispowerof2.h"

int
main (void)
{
  unsigned i;

  if (is_power_of_2 (0)) {
    fprintf (stderr, "0 is not a power of two\n");
    exit (EXIT_FAILURE);
  }
  for (i = 0; i < 64; ++i) {
    uint64_t p = UINT64_C (1) << i;
    if (!is_power_of_2 (p) || log_2_bits (p) != i) {
      fprintf (stderr, "2^%u misjudged\n", i);
      exit (EXIT_FAILURE);
    }
    if (i >= 2 && is_power_of_2 (p - 1)) {
      fprintf (stderr, "2^%u-1 taken for a power of two\n", i);
      exit (EXIT_FAILURE);
    }
    if (i >= 1 && i < 63 && is_power_of_2 (p + (p >> 1))) {
      fprintf (stderr, "1.5 * 2^%u taken for a power of two\n", i);
      exit (EXIT_FAILURE);
    }
  }
  return EXIT_SUCCESS;
}
