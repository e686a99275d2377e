/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The system calls that move an overlay store's data, shared by both
 * stores: data moves with pread and pwrite only, never through a map
 * of the file (docs/design.md, "Data moves with pread and pwrite").
 */

#ifndef COW_STOREIO_H
#define COW_STOREIO_H

#include <stdint.h>

/* Writes buf, or zeros if buf is NULL, at file offset at of fd,
 * allocating space.  Zeros of more than a page use
 * FALLOC_FL_ZERO_RANGE where the filesystem has it, which allocates
 * without writing; they stay allocated, since the client did not
 * allow a hole and later writes into the block should not fail for
 * want of space.  No pwrite crosses a multiple of 128 KiB of the file.
 * Returns 0, or -1 with errno set.
 */
extern int storeio_write (int fd, const void *buf, uint64_t count,
                          uint64_t at);

/* Sets *err to errno and reports, naming the disk offset, that what
 * ("read", "write"...) of count bytes at offset failed: logged, but a
 * refusal for want of room in the filesystem (ENOSPC, EDQUOT, EFBIG),
 * which a client can cause, only the first time, and counted.
 */
extern void storeio_report (const char *what, uint64_t count,
                            uint64_t offset, int *err);

/* The refusals for want of room so far, the server's. */
extern uint64_t storeio_room_refusals (void);

#endif /* COW_STOREIO_H */
