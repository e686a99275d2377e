/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The blocks of 2^shift bytes wholly inside [offset, end) of a disk of
 * size bytes: [*first, *stop), empty when *first >= *stop.  The disk's
 * last block may be short, and a range reaching the size covers it
 * whole.  Requires offset < end <= size.  No overflow for any size.
 */

#ifndef COMMON_WHOLEBLOCKS_H
#define COMMON_WHOLEBLOCKS_H

#include <stdint.h>

#include "divround.h"

static inline void
whole_blocks (unsigned shift, uint64_t size, uint64_t offset, uint64_t end,
              uint64_t *first, uint64_t *stop)
{
  uint64_t block = UINT64_C (1) << shift;

  *first = div_round_up (offset, block);
  *stop = end == size ? div_round_up (end, block) : end >> shift;
}

#endif /* COMMON_WHOLEBLOCKS_H */
