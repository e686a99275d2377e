/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block-size limits of an NBD server (its minimum and maximum
 * block sizes), the requests that respect them, and what a server
 * over such a one with blocks of its own advertises.
 *
 * A request respecting the limits starts and ends on a multiple of
 * align, but where it ends at the disk's size, and is at most max
 * bytes long.  block_limits_next cuts any range of bytes into such
 * requests: an unaligned end of the range is read as the one aligned
 * unit around it, a caller copying out the bytes it wanted.
 */

#ifndef COMMON_BLOCKLIMITS_H
#define COMMON_BLOCKLIMITS_H

#include <stdint.h>

/* The most a preferred block size may be (the NBD protocol). */
#define BLOCK_LIMITS_MAX_PREFERRED (32 * 1024 * 1024)

struct block_limits {
  uint32_t align;               /* a power of two */
  uint32_t max;                 /* a multiple of align */
};

/* The limits of a server advertising minimum and maximum (0 for no
 * constraint, as nbdkit's block_size reports "no information").  A
 * minimum is a power of two, as nbdkit and the NBD protocol require.
 */
static inline struct block_limits
block_limits_of (uint32_t minimum, uint32_t maximum)
{
  struct block_limits l;

  l.align = minimum ? minimum : 1;
  l.max = maximum ? maximum : UINT32_MAX;
  l.max -= l.max % l.align;
  if (l.max == 0)
    l.max = l.align;
  return l;
}

/* Whether the limits allow any request. */
static inline int
block_limits_none (const struct block_limits *l)
{
  return l->align == 1 && l->max == UINT32_MAX;
}

/* Whether [offset, offset+count) respects the limits on a disk of size
 * bytes.
 */
static inline int
block_limits_allow (const struct block_limits *l, uint64_t offset,
                    uint64_t count, uint64_t size)
{
  uint64_t mask = l->align - 1;

  return (offset & mask) == 0 && count <= l->max &&
         ((count & mask) == 0 || offset + count == size);
}

/* The next request that reads bytes [offset, end) of a disk of size
 * bytes: sets *req_offset and *req_count to a request respecting the
 * limits, and returns how many bytes from offset on it holds (> 0), at
 * offset - *req_offset in it.  Where the request is exactly those
 * bytes it can read them in place; otherwise it is one aligned unit
 * around an unaligned end of the range.  Requires offset < end <= size.
 */
static inline uint64_t
block_limits_next (const struct block_limits *l, uint64_t offset,
                   uint64_t end, uint64_t size, uint64_t *req_offset,
                   uint32_t *req_count)
{
  uint64_t start = offset - offset % l->align, n;

  if (start == offset) {
    n = end - offset;
    if (n > l->max)
      n = l->max;
    if (offset + n < size)
      n -= n % l->align;
    if (n > 0) {
      *req_offset = offset;
      *req_count = n;
      return n;
    }
  }
  /* The unit around an unaligned end, short if the disk ends in it. */
  n = size - start < l->align ? size - start : l->align;
  *req_offset = start;
  *req_count = n;
  return (end < start + n ? end : start + n) - offset;
}

/* What a server with blocks of block_size bytes advertises over one
 * whose limits are *minimum, *preferred and *maximum (all 0: none),
 * rewriting them: the minimum and maximum it must respect itself,
 * and a preferred size of at least a block where the maximum allows
 * a block, and the protocol a preferred size that large.
 */
static inline void
block_limits_advertise (uint32_t block_size, uint32_t *minimum,
                        uint32_t *preferred, uint32_t *maximum)
{
  uint32_t want = block_size < BLOCK_LIMITS_MAX_PREFERRED
                  ? block_size : BLOCK_LIMITS_MAX_PREFERRED;

  if (*minimum == 0) {
    *minimum = 1;
    *preferred = want;
    *maximum = UINT32_MAX;
    return;
  }
  if (want <= *maximum && *preferred < want)
    *preferred = want;
}

#endif /* COMMON_BLOCKLIMITS_H */
