/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of clusterzip.h: a compressible cluster deflates shorter
 * and inflates back exactly, with bytes past its stream's end (a
 * sector's rest) ignored; random bytes do not fit in less than their
 * length; a stream cut short, or one that inflates short of the
 * cluster, is refused.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clusterzip.h"

#define CLUSTER 65536

static void
expect (int ok, const char *what)
{
  if (!ok) {
    fprintf (stderr, "test-clusterzip: %s\n", what);
    exit (EXIT_FAILURE);
  }
}

int
main (void)
{
  static unsigned char in[CLUSTER], z[CLUSTER + 512], back[CLUSTER];
  size_t i, n;

  for (i = 0; i < CLUSTER; ++i)
    in[i] = i % 251 < 32 ? (unsigned char) (i / 512) : 0;
  n = clusterzip_deflate (in, CLUSTER, z, CLUSTER - 1);
  expect (n > 0 && n < CLUSTER / 8, "a compressible cluster deflates short");
  memset (z + n, 0xa5, 512);
  expect (clusterzip_inflate (z, n + 511, back, CLUSTER) == 0 &&
          memcmp (in, back, CLUSTER) == 0,
          "it inflates back, the bytes past its end ignored");
  expect (clusterzip_inflate (z, n / 2, back, CLUSTER) == -1,
          "a stream cut short is refused");
  expect (clusterzip_inflate (z, n, back, CLUSTER / 2) == 0,
          "a stream longer than out fills it (qemu's rule)");
  n = clusterzip_deflate (in, CLUSTER / 2, z, CLUSTER - 1);
  expect (clusterzip_inflate (z, n, back, CLUSTER) == -1,
          "a stream that inflates short of the cluster is refused");
  srand (7);
  for (i = 0; i < CLUSTER; ++i)
    in[i] = rand () >> 7;
  expect (clusterzip_deflate (in, CLUSTER, z, CLUSTER - 1) == 0,
          "random bytes do not fit in less than their length");
  return EXIT_SUCCESS;
}
