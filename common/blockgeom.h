/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The geometry of a disk cut into blocks: blocks of 2^shift bytes,
 * the last one short if the size is not a multiple of the block size.
 * The one definition of where a block starts and ends, which the
 * filter's block map, base map, stores and stripes, the kept format
 * and nbdcow all use.  No overflow for any size.
 */

#ifndef COMMON_BLOCKGEOM_H
#define COMMON_BLOCKGEOM_H

#include <stdint.h>

struct blockgeom {
  unsigned shift;               /* blocks of 2^shift bytes */
  uint64_t size;                /* of the disk, in bytes */
};

/* Blocks of block_size bytes, a power of two, over size bytes. */
static inline struct blockgeom
blockgeom_make (uint64_t block_size, uint64_t size)
{
  return (struct blockgeom) { .shift = 63 - __builtin_clzll (block_size),
                              .size = size };
}

static inline uint64_t
blockgeom_block_size (const struct blockgeom *g)
{
  return UINT64_C (1) << g->shift;
}

/* The blocks of the disk, the short last one counted. */
/* The sub-blocks a block is cut into where it can be held in part
 * (the cow filter's map, the kept format): 4K, or a 32nd of a block
 * larger than 128K, so at most 32 to a block, as qcow2's subclusters.
 * Their shift; not below the block's own means none.
 */
#define BLOCKGEOM_SUB_MIN_SHIFT 12
#define BLOCKGEOM_SUBS_MAX_SHIFT 5

static inline unsigned
blockgeom_sub_shift (const struct blockgeom *g)
{
  return g->shift > BLOCKGEOM_SUB_MIN_SHIFT + BLOCKGEOM_SUBS_MAX_SHIFT
         ? g->shift - BLOCKGEOM_SUBS_MAX_SHIFT : BLOCKGEOM_SUB_MIN_SHIFT;
}

static inline uint64_t
blockgeom_blocks (const struct blockgeom *g)
{
  return (g->size >> g->shift) +
         ((g->size & (blockgeom_block_size (g) - 1)) != 0);
}

/* The block holding byte offset. */
static inline uint64_t
blockgeom_block (const struct blockgeom *g, uint64_t offset)
{
  return offset >> g->shift;
}

/* The first byte of block b, and its end: the short last block ends at
 * the size.  blockgeom_end requires b < blockgeom_blocks.
 */
static inline uint64_t
blockgeom_start (const struct blockgeom *g, uint64_t b)
{
  return b << g->shift;
}

static inline uint64_t
blockgeom_end (const struct blockgeom *g, uint64_t b)
{
  uint64_t start = b << g->shift;

  return g->size - start > blockgeom_block_size (g)
         ? start + blockgeom_block_size (g) : g->size;
}

/* The end of the piece of [offset, end) from offset on that lies in
 * offset's block.
 */
static inline uint64_t
blockgeom_piece_end (const struct blockgeom *g, uint64_t offset, uint64_t end)
{
  uint64_t next = (blockgeom_block (g, offset) + 1) << g->shift;

  return next < end ? next : end;
}

/* The blocks wholly inside [offset, end): [*first, *stop), empty when
 * *first >= *stop.  A range reaching the size covers the short last
 * block whole.  Requires offset < end <= size.
 */
static inline void
blockgeom_whole (const struct blockgeom *g, uint64_t offset, uint64_t end,
                 uint64_t *first, uint64_t *stop)
{
  uint64_t mask = blockgeom_block_size (g) - 1;

  *first = (offset >> g->shift) + ((offset & mask) != 0);
  *stop = end == g->size ? (end >> g->shift) + ((end & mask) != 0)
                         : end >> g->shift;
}

#endif /* COMMON_BLOCKGEOM_H */
