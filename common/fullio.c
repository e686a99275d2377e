/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Whole reads and writes, or a failure (fullio.h). */

#include <config.h>

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fullio.h"

int
pread_full (int fd, void *buf, size_t count, off_t offset)
{
  char *p = buf;

  while (count > 0) {
    ssize_t r = pread (fd, p, count, offset);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (r == 0) {               /* end of file: the rest is a hole */
      memset (p, 0, count);
      return 0;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}

int
pwrite_full (int fd, const void *buf, size_t count, off_t offset)
{
  const char *p = buf;

  while (count > 0) {
    ssize_t r = pwrite (fd, p, count, offset);
    if (r == -1) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += r;
    count -= r;
    offset += r;
  }
  return 0;
}
