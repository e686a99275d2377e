/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The path an open file descriptor names, for the shims preloaded into
 * nbdkit (tests/overlay-faults.c, tests/power-log.c), which know the
 * overlay by it.
 */

#ifndef TESTS_FD_TARGET_H
#define TESTS_FD_TARGET_H

#include <stdbool.h>
#include <stdio.h>
#include <unistd.h>

/* Fills target (size bytes) with the path of fd, false if it has none. */
static inline bool
fd_target (int fd, char *target, size_t size)
{
  char link[64];
  ssize_t n;

  snprintf (link, sizeof link, "/proc/self/fd/%d", fd);
  n = readlink (link, target, size - 1);
  if (n <= 0)
    return false;
  target[n] = '\0';
  return true;
}

#endif /* TESTS_FD_TARGET_H */
