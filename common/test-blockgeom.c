/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of blockgeom.h: where blocks start and end, the short last
 * block, the pieces of a range and its whole blocks (aligned and
 * unaligned ends, a range inside one block, the short last block
 * covered only up to the size), and sizes and offsets near the largest
 * value, where rounding up by adding would overflow.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "blockgeom.h"

#define K 1024
static int failed;

static void
expect (const char *what, uint64_t got, uint64_t want)
{
  if (got != want) {
    fprintf (stderr, "test-blockgeom: %s = %" PRIu64 ", expected %" PRIu64
             "\n", what, got, want);
    failed = 1;
  }
}

static void
expect_whole (unsigned shift, uint64_t size, uint64_t offset, uint64_t end,
              uint64_t want_first, uint64_t want_stop)
{
  struct blockgeom g = blockgeom_make (UINT64_C (1) << shift, size);
  uint64_t first, stop;

  blockgeom_whole (&g, offset, end, &first, &stop);
  if (first != want_first || stop != want_stop) {
    fprintf (stderr, "test-blockgeom: whole blocks of [%" PRIu64 ", %" PRIu64
             ") (shift %u, size %" PRIu64 ") = [%" PRIu64 ", %" PRIu64 "),"
             " expected [%" PRIu64 ", %" PRIu64 ")\n", offset, end, shift,
             size, first, stop, want_first, want_stop);
    failed = 1;
  }
}

int
main (void)
{
  struct blockgeom g = blockgeom_make (4 * K, 10 * K);
  struct blockgeom huge = blockgeom_make (64 * K, UINT64_MAX);

  expect ("shift", g.shift, 12);
  expect ("block size", blockgeom_block_size (&g), 4 * K);
  expect ("blocks", blockgeom_blocks (&g), 3);
  expect ("block of 8K", blockgeom_block (&g, 8 * K), 2);
  expect ("start of 2", blockgeom_start (&g, 2), 8 * K);
  expect ("end of 1", blockgeom_end (&g, 1), 8 * K);
  expect ("end of the short last", blockgeom_end (&g, 2), 10 * K);
  expect ("piece in block 0", blockgeom_piece_end (&g, 100, 9 * K), 4 * K);
  expect ("piece to the end", blockgeom_piece_end (&g, 8 * K, 9 * K), 9 * K);
  expect ("blocks of a multiple", blockgeom_blocks (&(struct blockgeom) {
            .shift = 12, .size = 8 * K }), 2);
  expect ("blocks of UINT64_MAX", blockgeom_blocks (&huge),
          (UINT64_MAX >> 16) + 1);
  expect ("end of the last of UINT64_MAX",
          blockgeom_end (&huge, UINT64_MAX >> 16), UINT64_MAX);

  expect_whole (12, 64 * K, 0, 64 * K, 0, 16);          /* the whole disk */
  expect_whole (12, 64 * K, 4 * K, 12 * K, 1, 3);       /* aligned */
  expect_whole (12, 64 * K, 4 * K + 1, 12 * K - 1, 2, 2);   /* unaligned */
  expect_whole (12, 64 * K, 100, 200, 1, 0);            /* inside block 0 */
  expect_whole (12, 64 * K, 0, 4 * K - 1, 0, 0);        /* block 0 not whole */
  expect_whole (12, 10 * K, 8 * K, 10 * K, 2, 3);       /* short last block */
  expect_whole (12, 10 * K, 8 * K, 10 * K - 1, 2, 2);   /* not to the size */
  expect_whole (12, 10 * K, 7 * K, 10 * K, 2, 3);
  expect_whole (16, UINT64_MAX, UINT64_MAX - 5, UINT64_MAX, /* no overflow */
                (UINT64_MAX >> 16) + 1, (UINT64_MAX >> 16) + 1);
  expect_whole (16, UINT64_MAX - 1, 1, UINT64_MAX - 2, 1, UINT64_MAX >> 16);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
