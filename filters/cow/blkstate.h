/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The states of a block of the overlay (docs/design.md, "Block
 * states"), as the block layer, its map and the NBD callbacks name
 * them.
 */

#ifndef COW_BLKSTATE_H
#define COW_BLKSTATE_H

enum blk_state {
  BLK_NOT_ALLOCATED = 0,        /* reads come from the base */
  BLK_ALLOCATED = 1,            /* the whole block is in the overlay */
  BLK_ZERO = 2,                 /* reads as zeros, a hole in the overlay */
};

#endif /* COW_BLKSTATE_H */
