/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The types the block layer's units and its stores share: the states
 * of a block, the base as the layer reads it, and the layer's locks.
 * Below every header of the layer, so that the units under the layer's
 * interface (blk.h) include nothing above them.
 */

#ifndef COW_BLKTYPES_H
#define COW_BLKTYPES_H

#include <stdbool.h>
#include <stdint.h>

/* The most stripes an overlay is cut into (cow-stripes). */
#define BLK_MAX_STRIPES 64

/* The states of a block of the overlay (docs/design.md, "Block
 * states").
 */
enum blk_state {
  BLK_NOT_ALLOCATED = 0,        /* reads come from the base */
  BLK_ALLOCATED = 1,            /* the whole block is in the overlay */
  BLK_ZERO = 2,                 /* reads as zeros, a hole in the overlay */
  BLK_PARTIAL = 3,              /* some units in the overlay, the
                                 * others read from the base (blkmap.h);
                                 * never reported by blk_state_run */
};
#define BLK_STATES 4

/* The base as the layer reads it: the plugin below the filter, behind
 * two calls that cow.c fills in from nbdkit's next backend (baseio.h).
 */
typedef void blk_found_run (void *found_opaque, uint64_t offset,
                            uint64_t length, bool zero);
struct blk_base {
  /* Returns 0, or -1 with *err set to a positive errno. */
  int (*pread) (void *opaque, void *buf, uint32_t count, uint64_t offset,
                int *err);
  /* Tells what the base holds over [offset, offset+count), or over a
   * prefix of it: calls found (found_opaque, ...) for runs in order,
   * zero true only where the base is known to read as zeros.  Returns
   * -1 if it cannot tell.  May be NULL: then the base is always read.
   */
  int (*describe) (void *opaque, uint32_t count, uint64_t offset,
                   blk_found_run *found, void *found_opaque);
  void *opaque;
  /* Not NULL for the background fill (fill.h), whose reads of the
   * base add their bytes here and give way to the clients'
   * (blk_client_base_reads_under_way).
   */
  uint64_t *background_bytes;
};

/* The locks of the layer, whose waits the statistics count
 * (docs/design.md says what each protects).
 */
enum blk_lock {
  BLK_LOCK_RMW,                 /* rmw_locks */
  BLK_LOCK_STATE,               /* state_lock */
  BLK_LOCK_WRITE,               /* the stripes' write locks */
  BLK_LOCK_FLUSH,               /* flush_lock */
  BLK_LOCK_BASE_MAP,            /* base_map_lock */
  BLK_LOCKS
};

#endif /* COW_BLKTYPES_H */
