/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Per-thread scratch buffers for the request path.
 *
 * Why: a read-modify-write or a copy-up needs a buffer of a block or
 * more.  glibc serves allocations of 128 KiB and up with mmap and
 * gives them back with munmap, so with many worker threads every such
 * request faulted its pages in again and serialized on the process's
 * mmap lock.  Measured: 4K random writes with 1M blocks ran 20 times
 * slower in parallel than serialized (docs/performance.md).  A buffer
 * that each thread keeps costs its page faults once.
 *
 * Each thread caches one buffer of at most SCRATCH_KEEP bytes, freed
 * when the thread exits.  A larger request, or a second one while the
 * cached buffer is out, gets a fresh malloc that scratch_put frees.
 */

#ifndef COMMON_SCRATCH_H
#define COMMON_SCRATCH_H

#include <stddef.h>

#define SCRATCH_KEEP (8 * 1024 * 1024)

/* A buffer of at least size bytes, or NULL with errno set. */
extern void *scratch_get (size_t size);

/* Gives back what scratch_get returned (NULL is allowed). */
extern void scratch_put (void *buf);

#endif /* COMMON_SCRATCH_H */
