/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A preloaded shim for nbdkit (NBDKIT_PRELOAD=.../overlay-faults.so
 * ./nbdkit ...): writes to the cow overlay fail with EIO, or are slow.
 *
 *   COW_FAULT_FILE=PATH      faults only while PATH exists
 *   COW_FAULT_RATE=N         percentage of overlay writes that fail (10)
 *   COW_FAULT_DELAY_MS=N     instead of failing, a faulted write waits
 *                            N milliseconds, then is done
 *   COW_FAULT_MATCH=STRING   the files faulted: those whose path holds
 *                            STRING (default "/nbdkit-cow-", the
 *                            throw-away overlay's files, unlinked)
 *   COW_FAULT_SYNCS=1        fault the syncs (fdatasync, fsync) instead
 *                            of the writes
 *
 * So the plugin's own files and sockets are never touched.  It covers
 * pwrite and fallocate, the calls the filter writes the overlay with,
 * or the syncs.
 */

#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "fd-target.h"

static atomic_uint counter;

/* Whether fd is a file to fault (COW_FAULT_MATCH). */
static int
is_overlay (int fd)
{
  const char *match = getenv ("COW_FAULT_MATCH");
  char target[4096];

  return fd_target (fd, target, sizeof target) &&
         strstr (target, match ? match : "/nbdkit-cow-") != NULL;
}

/* While COW_FAULT_FILE exists, COW_FAULT_RATE of every 100 writes
 * (counted across all threads) are faulted, if they are to the overlay.
 */
static int
should_fail (int fd)
{
  const char *file = getenv ("COW_FAULT_FILE");
  const char *rate = getenv ("COW_FAULT_RATE");

  if (file == NULL || access (file, F_OK) != 0)
    return 0;
  if (atomic_fetch_add (&counter, 1) % 100 >= (unsigned) (rate ? atoi (rate) : 10))
    return 0;
  return is_overlay (fd);
}

/* Whether the call is of the kind faulted: syncs or writes. */
static int
faults_syncs (void)
{
  const char *syncs = getenv ("COW_FAULT_SYNCS");

  return syncs && strcmp (syncs, "1") == 0;
}

/* Whether a write to fd fails: else, if faulted, it is first delayed. */
static int
write_fails (int fd)
{
  const char *delay = getenv ("COW_FAULT_DELAY_MS");

  if (faults_syncs () || !should_fail (fd))
    return 0;
  if (delay == NULL)
    return 1;
  usleep ((useconds_t) atoi (delay) * 1000);
  return 0;
}

ssize_t
pwrite (int fd, const void *buf, size_t count, off_t offset)
{
  static ssize_t (*real) (int, const void *, size_t, off_t);

  if (!real)
    real = dlsym (RTLD_NEXT, "pwrite");
  if (write_fails (fd)) {
    errno = EIO;
    return -1;
  }
  return real (fd, buf, count, offset);
}

ssize_t
pwrite64 (int fd, const void *buf, size_t count, off_t offset)
{
  return pwrite (fd, buf, count, offset);
}

int
fallocate (int fd, int mode, off_t offset, off_t len)
{
  static int (*real) (int, int, off_t, off_t);

  if (!real)
    real = dlsym (RTLD_NEXT, "fallocate");
  if (write_fails (fd)) {
    errno = EIO;
    return -1;
  }
  return real (fd, mode, offset, len);
}

int
fallocate64 (int fd, int mode, off_t offset, off_t len)
{
  return fallocate (fd, mode, offset, len);
}

/* A sync faulted fails with EIO, as a disk's failed write-back does. */
static int
sync_fails (int fd)
{
  if (!faults_syncs () || !should_fail (fd))
    return 0;
  errno = EIO;
  return 1;
}

int
fdatasync (int fd)
{
  static int (*real) (int);

  if (!real)
    real = dlsym (RTLD_NEXT, "fdatasync");
  return sync_fails (fd) ? -1 : real (fd);
}

int
fsync (int fd)
{
  static int (*real) (int);

  if (!real)
    real = dlsym (RTLD_NEXT, "fsync");
  return sync_fails (fd) ? -1 : real (fd);
}
