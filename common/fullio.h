/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* pread and pwrite that do the whole transfer or fail: the kernel may
 * return short counts (signals, huge requests), callers want all or
 * nothing.
 */

#ifndef COMMON_FULLIO_H
#define COMMON_FULLIO_H

#include <stddef.h>
#include <sys/types.h>

/* Read count bytes at offset.  Bytes past the end of the file read as
 * zero, because a sparse overlay is never truncated to the disk size.
 * Returns 0, or -1 with errno set.
 */
extern int pread_full (int fd, void *buf, size_t count, off_t offset);

/* Write count bytes at offset.  Returns 0, or -1 with errno set. */
extern int pwrite_full (int fd, const void *buf, size_t count, off_t offset);

#endif /* COMMON_FULLIO_H */
