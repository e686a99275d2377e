/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The disk space a file takes: its allocated blocks, in bytes (0 if it
 * cannot tell), as the overlay's statistics and nbdcow info show it.
 */

#ifndef COMMON_DISKBYTES_H
#define COMMON_DISKBYTES_H

#include <stdint.h>
#include <sys/stat.h>

static inline uint64_t
disk_bytes (int fd)
{
  struct stat st;

  if (fstat (fd, &st) == -1)
    return 0;
  return (uint64_t) st.st_blocks * 512;
}

#endif /* COMMON_DISKBYTES_H */
