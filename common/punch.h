/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Punching a hole in a file, its length kept. */

#ifndef COMMON_PUNCH_H
#define COMMON_PUNCH_H

#include <fcntl.h>
#include <stdint.h>

/* Gives the space of [offset, offset + count) of fd back to the
 * filesystem, leaving the file's length alone: the range reads as
 * zeros afterwards.  Returns 0, or -1 with errno set (EOPNOTSUPP where
 * the filesystem has no holes).  Requires _GNU_SOURCE (config.h).
 */
static inline int
punch_hole (int fd, uint64_t offset, uint64_t count)
{
  return fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                    (off_t) offset, (off_t) count);
}

#endif /* COMMON_PUNCH_H */
