/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A qcow2 compressed cluster's bytes, deflated and inflated
 * (clusterzip.h).
 */

#include <config.h>

#include <stdint.h>
#include <zlib.h>

#include "clusterzip.h"

/* qemu's: a raw deflate stream (negative window bits) of a 4K window. */
#define WINDOW_BITS (-12)
#define MEMORY_LEVEL 9

size_t
clusterzip_deflate (const void *in, size_t len, void *out, size_t max)
{
  z_stream s = { .next_in = (Bytef *) in, .avail_in = len,
                 .next_out = out, .avail_out = max };
  size_t n = 0;

  if (deflateInit2 (&s, Z_DEFAULT_COMPRESSION, Z_DEFLATED, WINDOW_BITS,
                    MEMORY_LEVEL, Z_DEFAULT_STRATEGY) != Z_OK)
    return 0;
  if (deflate (&s, Z_FINISH) == Z_STREAM_END)
    n = max - s.avail_out;
  deflateEnd (&s);
  return n;
}

int
clusterzip_inflate (const void *in, size_t n, void *out, size_t len)
{
  z_stream s = { .next_in = (Bytef *) in, .avail_in = n,
                 .next_out = out, .avail_out = len };
  int r;

  if (inflateInit2 (&s, WINDOW_BITS) != Z_OK)
    return -1;
  r = inflate (&s, Z_FINISH);
  inflateEnd (&s);
  /* As qemu: the stream ends, or fills out with bytes left over. */
  return (r == Z_STREAM_END || r == Z_BUF_ERROR) && s.avail_out == 0 ? 0 : -1;
}
