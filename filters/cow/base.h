/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The base as the block layer reads it: the plugin below the filter,
 * behind two calls that cow.c fills in from nbdkit's next backend.
 */

#ifndef COW_BASE_H
#define COW_BASE_H

#include <stdbool.h>
#include <stdint.h>

/* One run of the base as describe reports it. */
typedef void blk_found_run (void *found_opaque, uint64_t offset,
                            uint64_t length, bool zero);

/* pread returns 0, or -1 with *err set to a positive errno. */
struct blk_base {
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
};

#endif /* COW_BASE_H */
