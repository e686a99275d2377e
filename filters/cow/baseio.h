/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

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
#include <stdbool.h>
#include <stdint.h>

#include <nbdkit-filter.h>

#include "blktypes.h"
#include "blocklimits.h"
#include "kept.h"
#include "tsa.h"

/* The plugin as a connection reads it: next, the limits and size of
 * its stack, and the block layer's view of it (blktypes.h), whose
 * opaque is this struct.  Made once, when the connection is prepared;
 * next stays the connection's for its life: its own context, or one
 * its export shares (basepool.h).
 */
/* What a connection tells its client of the plugin beyond its data,
 * kept by an export whose fill is complete, so that its new
 * connections stand alone, with no context of the plugin.
 */
struct base_facts {
  uint64_t size;
  struct kept_answers answers;  /* block sizes, cache, rotational */
  char *description;            /* NULL for none */
};

struct base_io {
  nbdkit_next *next;            /* NULL where alone is set */
  const struct base_facts *alone;       /* every answer, or NULL */
  /* Held over every call into next that reaches the plugin, where
   * calls into one context must not overlap (a shared context under a
   * thread model that serializes requests); NULL where they may.
   */
  mutex_t *call_lock;
  bool shared;                  /* next is a context of a pool */
  struct block_limits limits;
  uint64_t size;
  struct blk_base blk;
};

/* Asks next for its size and limits and fills io.  shared says
 * whether next is a context of a pool (basepool.h), call_lock is its
 * call lock or NULL.  Returns 0, or -1 after nbdkit_error.
 */
extern int baseio_init (struct base_io *io, nbdkit_next *next, bool shared,
                        mutex_t *call_lock);

/* Fills io for a connection that reads nothing from the plugin: every
 * answer comes from facts, which must outlive io, and a read of the
 * base fails with EIO (the block layer makes none: every block of the
 * overlay is in it).
 */
extern void baseio_init_alone (struct base_io *io,
                               const struct base_facts *facts);

/* Asks io's plugin its facts.  Returns them, or NULL after
 * nbdkit_error.
 */
extern struct base_facts *baseio_facts_new (const struct base_io *io);
extern void baseio_facts_free (struct base_facts *facts);

/* facts as a kept file records them, without the size (its header has
 * it).  Returns false if they do not fit (a description longer than
 * KEPT_DESCRIPTION_MAX).
 */
extern bool baseio_facts_to_kept (const struct base_facts *facts,
                                  struct kept_facts *kept);

/* The facts a kept file recorded, for a base of size bytes.  Returns
 * them, or NULL after nbdkit_error.
 */
extern struct base_facts *
baseio_facts_from_kept (const struct kept_facts *kept, uint64_t size);

/* What nbdkit caches of the plugin: its block sizes (0, or -1 after
 * nbdkit_error), whether it caches, whether it is rotational.
 */
extern int baseio_block_size (const struct base_io *io, uint32_t *minimum,
                              uint32_t *preferred, uint32_t *maximum);
extern int baseio_can_cache (const struct base_io *io);
extern int baseio_is_rotational (const struct base_io *io);

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
