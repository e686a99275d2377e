/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of crc32c.h: the published check value, vectors from RFC
 * 3720 (iSCSI), that a checksum can be continued piecewise, and that
 * the CPU's instruction and the table agree over every length and
 * alignment of a buffer of random bytes.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"

static void
expect (uint32_t got, uint32_t want, const char *what)
{
  if (got != want) {
    fprintf (stderr, "test-crc32c: %s: got %08x, want %08x\n",
             what, (unsigned) got, (unsigned) want);
    exit (EXIT_FAILURE);
  }
}

int
main (void)
{
  static const char check[] = "123456789";
  unsigned char zeros[32] = { 0 }, ones[32], random[4096 + 16];
  size_t split, i, start, len;

  memset (ones, 0xff, sizeof ones);
  expect (crc32c (0, check, 9), 0xE3069283, "check value of \"123456789\"");
  expect (crc32c (0, zeros, sizeof zeros), 0x8A9136AA, "RFC 3720, 32 zeros");
  expect (crc32c (0, ones, sizeof ones), 0x62A8AB43, "RFC 3720, 32 0xff");
  expect (crc32c (0, "", 0), 0, "empty");
  for (split = 0; split <= 9; ++split)
    expect (crc32c (crc32c (0, check, split), check + split, 9 - split),
            0xE3069283, "continued checksum");
  expect (crc32c_table (0, check, 9), 0xE3069283, "the table's check value");
  srand (98);
  for (i = 0; i < sizeof random; ++i)
    random[i] = rand ();
  for (start = 0; start < 16; ++start)
    for (len = 0; start + len <= sizeof random; len += 1 + len / 8)
      expect (crc32c (7, random + start, len),
              crc32c_table (7, random + start, len),
              "the instruction and the table");
  return EXIT_SUCCESS;
}
