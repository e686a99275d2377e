/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The pieces of a block: the one model of a block held in part.  A
 * block starting at byte start is cut into pieces of 2^shift bytes
 * (its sub-blocks, or its units in places), at most 32, piece i being
 * bit i of a mask; the last piece ends at the block's end.  Here are
 * the arithmetic of those masks: a mask's runs as byte ranges, and an
 * offset rounded to its piece.
 *
 *   struct piece_runs r = piece_runs (start, shift, bits, from, to);
 *   while (piece_runs_next (&r, &at, &next))
 *     ... [at, next), clipped to [from, to) ...
 */

#ifndef COMMON_PIECES_H
#define COMMON_PIECES_H

#include <stdbool.h>
#include <stdint.h>

/* The first run of set bits of bits at or after bit from: returns its
 * first bit and sets *end after its last, or returns 32 if there is
 * none.
 */
static inline unsigned
bit_run (uint32_t bits, unsigned from, unsigned *end)
{
  unsigned first, last;

  if (from >= 32 || (bits >> from) == 0)
    return 32;
  first = from + __builtin_ctz (bits >> from);
  last = first;
  while (last < 32 && (bits >> last & 1))
    ++last;
  *end = last;
  return first;
}

struct piece_runs {
  uint64_t start, from, to;
  unsigned shift, i;
  uint32_t bits;
};

static inline struct piece_runs
piece_runs (uint64_t start, unsigned shift, uint32_t bits, uint64_t from,
            uint64_t to)
{
  return (struct piece_runs) {
    .start = start, .from = from, .to = to, .shift = shift, .bits = bits,
  };
}

/* The next run of pieces: true with [*at, *next) set, clipped to
 * [from, to); false after the last.
 */
static inline bool
piece_runs_next (struct piece_runs *r, uint64_t *at, uint64_t *next)
{
  unsigned end;

  r->i = bit_run (r->bits, r->i, &end);
  if (r->i >= 32)
    return false;
  *at = r->start + ((uint64_t) r->i << r->shift);
  *next = r->start + ((uint64_t) end << r->shift);
  r->i = end;
  if (*at < r->from)
    *at = r->from;
  if (*next > r->to)
    *next = r->to;
  return true;
}

/* The bit of the piece that holds byte at. */
static inline uint32_t
piece_bit (uint64_t start, unsigned shift, uint64_t at)
{
  return UINT32_C (1) << ((at - start) >> shift);
}

/* The start of the piece that holds byte at. */
static inline uint64_t
piece_floor (uint64_t start, unsigned shift, uint64_t at)
{
  return start + ((at - start) >> shift << shift);
}

/* The end of the piece that holds byte at - 1, at most stop, the
 * block's end.
 */
static inline uint64_t
piece_ceil (uint64_t start, uint64_t stop, unsigned shift, uint64_t at)
{
  uint64_t end = start + ((((at - 1 - start) >> shift) + 1) << shift);

  return end < stop ? end : stop;
}

#endif /* COMMON_PIECES_H */
