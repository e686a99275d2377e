/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The stripes of the disk and their write locks (docs/design.md, "The
 * write locks").  The disk is cut into chunks of STRIPE_CHUNK bytes,
 * or one block if blocks are larger, and chunk c belongs to stripe
 * c mod nr, so that writes to different parts of the disk do not wait
 * for one lock.  A throw-away store gives each stripe a file of its
 * own; a kept store's one file is written under the same locks.
 *
 * The locks are the block layer's (struct blk): it takes a range's
 * together with stripes_lock, in ascending stripe order, over every
 * write and punch of its store and over the state lookups that must
 * not race them.  A store takes none of them: it checks that they are
 * held (stripes_held) and shares their chunks (stripes_chunk_shift).
 */

#ifndef COW_STRIPES_H
#define COW_STRIPES_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "tsa.h"

/* A chunk's bytes: a request of up to 1M meets one or two of them.
 * The fuzzer makes it smaller, to cross stripes on its small disks.
 */
#ifndef STRIPE_CHUNK
#define STRIPE_CHUNK (1024 * 1024)
#endif

/* log2 of a chunk's bytes for blocks of 2^block_shift bytes:
 * STRIPE_CHUNK, or one block if blocks are larger.  The throw-away
 * store packs its files by these chunks, with one stripe too, where
 * the stripes split nothing.
 */
static inline unsigned
stripes_chunk_shift (unsigned block_shift)
{
  unsigned shift = __builtin_ctz (STRIPE_CHUNK);

  return block_shift > shift ? block_shift : shift;
}

/* One capability for the analysis (tsa.h): a function that REQUIRES
 * (*stripes) holds the write locks of the range it works on.
 */
struct CAPABILITY ("stripes") stripes {
  unsigned nr;
  unsigned chunk_shift;         /* stripes_chunk_shift of the blocks */
  mutex_t *locks;               /* nr of them */
};

/* nr stripes (1 to 64) of a disk of blocks of 2^block_shift bytes.
 * Returns 0, or -1 with errno set.
 */
extern int stripes_init (struct stripes *s, unsigned nr, unsigned block_shift);
extern void stripes_free (struct stripes *s);

/* Takes, in ascending order, the write locks of the stripes holding
 * [offset, offset+count), count > 0.  Returns the nanoseconds spent
 * waiting, 0 if none.
 */
extern uint64_t stripes_lock (struct stripes *s, uint64_t offset,
                              uint64_t count) ACQUIRE (*s);
extern void stripes_unlock (struct stripes *s, uint64_t offset,
                            uint64_t count) RELEASE (*s);

/* Whether the calling thread holds the write locks of [offset,
 * offset+count), in checked builds (checks.h); true otherwise.
 */
extern bool stripes_held (const struct stripes *s, uint64_t offset,
                          uint64_t count);

#endif /* COW_STRIPES_H */
