/* Unit test of wholeblocks.h: aligned and unaligned ends, a range
 * inside one block, the short last block covered only up to the size,
 * and offsets near the largest value, where rounding up by adding
 * would overflow.
 */

#include <stdio.h>
#include <stdlib.h>

#include "wholeblocks.h"

#define K 1024
static int failed;

static void
expect (unsigned shift, uint64_t size, uint64_t offset, uint64_t end,
        uint64_t want_first, uint64_t want_stop)
{
  uint64_t first, stop;

  whole_blocks (shift, size, offset, end, &first, &stop);
  if (first != want_first || stop != want_stop) {
    fprintf (stderr, "test-wholeblocks: whole_blocks (%u, %llu, %llu, %llu)"
             " = [%llu, %llu), expected [%llu, %llu)\n", shift,
             (unsigned long long) size, (unsigned long long) offset,
             (unsigned long long) end, (unsigned long long) first,
             (unsigned long long) stop, (unsigned long long) want_first,
             (unsigned long long) want_stop);
    failed = 1;
  }
}

int
main (void)
{
  expect (12, 64 * K, 0, 64 * K, 0, 16);                /* the whole disk */
  expect (12, 64 * K, 4 * K, 12 * K, 1, 3);             /* aligned */
  expect (12, 64 * K, 4 * K + 1, 12 * K - 1, 2, 2);     /* unaligned: [2, 2) */
  expect (12, 64 * K, 100, 200, 1, 0);                  /* inside block 0 */
  expect (12, 64 * K, 0, 4 * K - 1, 0, 0);              /* block 0 not whole */
  expect (12, 10 * K, 8 * K, 10 * K, 2, 3);             /* short last block */
  expect (12, 10 * K, 8 * K, 10 * K - 1, 2, 2);         /* not to the size */
  expect (12, 10 * K, 7 * K, 10 * K, 2, 3);
  expect (16, UINT64_MAX, UINT64_MAX - 5, UINT64_MAX,   /* no overflow */
          (UINT64_MAX >> 16) + 1, (UINT64_MAX >> 16) + 1);
  expect (16, UINT64_MAX - 1, 1, UINT64_MAX - 2, 1, UINT64_MAX >> 16);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
