/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of pieces.h: the runs of masks as byte ranges, clipped, at
 * a block's first and last pieces and a short last piece; offsets
 * rounded to their pieces.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pieces.h"

static int failed;

#define EXPECT(cond)                                                    \
  do {                                                                  \
    if (!(cond)) {                                                      \
      fprintf (stderr, "test-pieces: %s:%d: %s\n", __FILE__, __LINE__,  \
               #cond);                                                  \
      failed = 1;                                                       \
    }                                                                   \
  } while (0)

/* The runs of bits over the block at start (pieces of 4K) clipped to
 * [from, to), written as "at-next," into got.
 */
static void
runs (uint32_t bits, uint64_t start, uint64_t from, uint64_t to, char *got)
{
  struct piece_runs r = piece_runs (start, 12, bits, from, to);
  uint64_t at, next;

  got[0] = '\0';
  while (piece_runs_next (&r, &at, &next))
    sprintf (got + strlen (got), "%" PRIu64 "-%" PRIu64 ",", at, next);
}

int
main (void)
{
  char got[512];
  unsigned end = 0;

  EXPECT (bit_run (0, 0, &end) == 32);
  EXPECT (bit_run (0x6, 0, &end) == 1 && end == 3);
  EXPECT (bit_run (0x6, 3, &end) == 32);
  EXPECT (bit_run (UINT32_C (0x80000000), 0, &end) == 31 && end == 32);
  EXPECT (bit_run (UINT32_MAX, 32, &end) == 32);

  runs (0, 65536, 65536, 131072, got);
  EXPECT (strcmp (got, "") == 0);
  runs (0x1 | 0x6 | 0x8000, 65536, 65536, 131072, got);
  EXPECT (strcmp (got, "65536-77824,126976-131072,") == 0);
  /* Clipped to a request inside the pieces. */
  runs (0x6, 65536, 65536 + 5000, 65536 + 10000, got);
  EXPECT (strcmp (got, "70536-75536,") == 0);
  /* A short last block: the last piece ends at the block's end. */
  runs (0x3, 0, 0, 6000, got);
  EXPECT (strcmp (got, "0-6000,") == 0);
  /* All 32 pieces. */
  runs (UINT32_MAX, 0, 0, 131072, got);
  EXPECT (strcmp (got, "0-131072,") == 0);

  EXPECT (piece_bit (65536, 12, 65536) == 1);
  EXPECT (piece_bit (65536, 12, 65536 + 4095) == 1);
  EXPECT (piece_bit (65536, 12, 65536 + 4096) == 2);
  EXPECT (piece_bit (0, 12, 131071) == UINT32_C (0x80000000));
  EXPECT (piece_floor (65536, 12, 65536 + 5000) == 65536 + 4096);
  EXPECT (piece_floor (65536, 12, 65536) == 65536);
  EXPECT (piece_ceil (65536, 131072, 12, 65536 + 5000) == 65536 + 8192);
  EXPECT (piece_ceil (65536, 131072, 12, 65536 + 4096) == 65536 + 4096);
  EXPECT (piece_ceil (0, 6000, 12, 5000) == 6000);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
