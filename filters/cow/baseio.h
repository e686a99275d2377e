/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The requests the filter sends to the plugin below it (the base):
 * reads, extents and cache, each cut to the block-size limits the
 * plugin's stack advertises (blocklimits.h), whatever range the block
 * layer or the client asks about.  A stack with a maximum request size
 * (nbdkit's blocksize-policy filter, the nbd plugin over qemu-nbd)
 * would refuse a longer request; one with a minimum would refuse an
 * unaligned one, so an unaligned end is read as the aligned unit
 * around it and the bytes wanted copied out.
 */

#ifndef COW_BASEIO_H
#define COW_BASEIO_H

#include <pthread.h>
#include <stdint.h>

#include <nbdkit-filter.h>

#include "blktypes.h"
#include "blocklimits.h"
#include "tsa.h"

/* The plugin as a connection reads it: next, the limits and size of
 * its stack, and the block layer's view of it (blktypes.h), whose
 * opaque is this struct.  Made once, when the connection is prepared;
 * next stays the connection's for its life: its own context, or one
 * its export shares (basepool.h).
 */
struct base_io {
  nbdkit_next *next;
  /* Held over every call into next that reaches the plugin, where
   * calls into one context must not overlap (a shared context under a
   * thread model that serializes requests); NULL where they may.
   */
  mutex_t *call_lock;
  struct block_limits limits;
  uint64_t size;
  struct blk_base blk;
};

/* Asks next for its size and limits and fills io.  Returns 0, or -1
 * after nbdkit_error.
 */
extern int baseio_init (struct base_io *io, nbdkit_next *next,
                        mutex_t *call_lock);

/* The plugin's description of the export (NULL for none). */
extern const char *baseio_export_description (const struct base_io *io);

/* Adds to extents the plugin's extents of [offset, offset+count), or
 * plain data where it cannot tell.  With NBDKIT_FLAG_REQ_ONE in flags
 * it may add only those of a prefix.  Returns 0, or -1 with *err set.
 */
extern int baseio_extents (const struct base_io *io, uint32_t count,
                           uint64_t offset, uint32_t flags,
                           struct nbdkit_extents *extents, int *err);

/* Passes a cache request to the plugin.  Returns 0, or -1 with *err
 * set.
 */
extern int baseio_cache (const struct base_io *io, uint32_t count,
                         uint64_t offset, uint32_t flags, int *err);

#endif /* COW_BASEIO_H */
