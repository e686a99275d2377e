/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of blocklimits.h: every range of many small disks, under
 * limits from none to an alignment larger than a block and a maximum
 * smaller than one, is cut into requests that respect the limits,
 * hold the bytes asked for in order, and stop at the end of the range;
 * and what is advertised over a server's limits.
 */

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "blocklimits.h"

static int failed;

static void
fail (const char *what, uint32_t align, uint32_t max, uint64_t size,
      uint64_t offset, uint64_t end)
{
  fprintf (stderr, "test-blocklimits: %s: align %" PRIu32 " max %" PRIu32
           " size %" PRIu64 " range [%" PRIu64 ", %" PRIu64 ")\n",
           what, align, max, size, offset, end);
  failed = 1;
}

/* Cuts [offset, end) and checks every request. */
static void
check_range (const struct block_limits *l, uint64_t size, uint64_t offset,
             uint64_t end)
{
  uint64_t at = offset, req_offset, n;
  uint32_t req_count;
  unsigned requests = 0;

  while (at < end) {
    n = block_limits_next (l, at, end, size, &req_offset, &req_count);
    if (n == 0 || at + n > end)
      return fail ("a request holds nothing or more than asked", l->align,
                   l->max, size, offset, end);
    if (!block_limits_allow (l, req_offset, req_count, size) ||
        req_offset + req_count > size)
      return fail ("a request breaks the limits", l->align, l->max, size,
                   offset, end);
    if (req_offset > at || req_offset + req_count < at + n)
      return fail ("a request misses the bytes it holds", l->align, l->max,
                   size, offset, end);
    if (++requests > 2 + (end - offset) / l->align)
      return fail ("too many requests", l->align, l->max, size, offset, end);
    at += n;
  }
}

static void
check_limits (uint32_t minimum, uint32_t maximum)
{
  struct block_limits l = block_limits_of (minimum, maximum);
  uint64_t size, offset, end;

  if (l.align == 0 || l.max % l.align != 0 || l.max < l.align)
    fail ("bad limits", minimum, maximum, 0, 0, 0);
  if (block_limits_none (&l) !=
      (minimum <= 1 && (maximum == 0 || maximum == UINT32_MAX)))
    fail ("limits none or not", minimum, maximum, 0, 0, 0);
  for (size = 1; size <= 70; size += 3)
    for (offset = 0; offset < size; ++offset)
      for (end = offset + 1; end <= size; ++end)
        check_range (&l, size, offset, end);
}

static void
expect_advertised (uint32_t block_size, uint32_t min, uint32_t pref,
                   uint32_t max, uint32_t want_min, uint32_t want_pref,
                   uint32_t want_max)
{
  block_limits_advertise (block_size, &min, &pref, &max);
  if (min != want_min || pref != want_pref || max != want_max) {
    fprintf (stderr, "test-blocklimits: advertised %" PRIu32 "/%" PRIu32
             "/%" PRIu32 ", expected %" PRIu32 "/%" PRIu32 "/%" PRIu32 "\n",
             min, pref, max, want_min, want_pref, want_max);
    failed = 1;
  }
}

int
main (void)
{
  struct block_limits l;
  uint64_t req_offset;
  uint32_t req_count;

  check_limits (0, 0);          /* no constraint */
  check_limits (1, 0xffffffff);
  check_limits (1, 5);          /* a maximum smaller than a block */
  check_limits (4, 8);
  check_limits (8, 8);
  check_limits (16, 64);        /* an alignment larger than some disks */
  check_limits (4, 10);         /* a maximum not a multiple: rounded */
  check_limits (8, 4);          /* a maximum below the minimum */

  /* Aligned ranges are read in place, in pieces of the maximum. */
  l = block_limits_of (512, 65536);
  if (block_limits_next (&l, 0, 1 << 20, 1 << 20, &req_offset,
                         &req_count) != 65536 ||
      req_offset != 0 || req_count != 65536)
    fail ("aligned range not read in place", 512, 65536, 1 << 20, 0,
          1 << 20);
  /* The short tail of a disk is read to its end, unaligned. */
  if (block_limits_next (&l, 1024, 1300, 1300, &req_offset,
                         &req_count) != 276 ||
      req_offset != 1024 || req_count != 276)
    fail ("short tail", 512, 65536, 1300, 1024, 1300);

  /* Nothing said: a block preferred, any alignment, no maximum. */
  expect_advertised (65536, 0, 0, 0, 1, 65536, 0xffffffff);
  /* The stack's minimum and maximum kept, preferred raised. */
  expect_advertised (65536, 512, 4096, 33554432, 512, 65536, 33554432);
  /* A maximum below a block: preferred left as it was. */
  expect_advertised (65536, 512, 16384, 16384, 512, 16384, 16384);
  /* A preferred size already larger stays. */
  expect_advertised (4096, 1, 1 << 20, 0xffffffff, 1, 1 << 20, 0xffffffff);
  /* Blocks larger than the protocol's largest preferred size. */
  expect_advertised (1u << 30, 0, 0, 0, 1, 33554432, 0xffffffff);
  expect_advertised (1u << 30, 4096, 4096, 0xffffffff, 4096, 33554432,
                     0xffffffff);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
