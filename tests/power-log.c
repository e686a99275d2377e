/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A preloaded shim for nbdkit (NBDKIT_PRELOAD=.../power-log.so
 * ./nbdkit ...) that logs every change nbdkit makes to one file and
 * every sync of it, so that a test can build what a disk may hold
 * after a power loss at the moment nbdkit is killed
 * (tests/kept-crash.py --power).
 *
 *   COW_POWER_FILE=PATH   the file to watch (absolute, no symlinks)
 *   COW_POWER_LOG=PATH    the log, appended to
 *   COW_POWER_CUT=N       kill nbdkit at the start of one sync in N
 *   COW_POWER_SEED=S      which ones (0)
 *   COW_POWER_CUT_AT=N    kill it instead at its Nth persistence point
 *                         on the file (each pwrite, fallocate, ftruncate
 *                         and sync, counted from 1), before the call:
 *                         tests/crash-points.py cuts at each in turn
 *
 * The cut aims at the moment the order of writes and syncs matters;
 * a kill at a random time rarely lands inside a sync, which is short.
 * Any process may load it (LD_PRELOAD=... nbdcow check --repair).
 *
 * Each call on the file writes a record before it starts and one when
 * it has returned, so the log shows which changes a sync may have
 * missed: those not yet returned when the sync started.  A record is
 * struct record followed, for pwrite, by the bytes written.
 */

#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "cut-point.h"
#include "fd-target.h"

enum kind {
  KIND_PWRITE = 1,      /* offset, len, then len bytes */
  KIND_FALLOCATE = 2,   /* mode, offset, len */
  KIND_FTRUNCATE = 3,   /* len */
  KIND_RETURNED = 4,    /* seq of the call that returned */
  KIND_SYNC_START = 5,  /* seq of this sync */
  KIND_SYNC_DONE = 6,   /* seq of the sync that succeeded */
};

struct record {
  uint32_t kind;
  uint32_t mode;
  uint64_t seq;
  uint64_t offset;
  uint64_t len;
};

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_seq;       /* under log_lock */
static int log_fd = -1;         /* opened under log_lock */

static int
is_watched (int fd)
{
  const char *file = getenv ("COW_POWER_FILE");
  char target[4096];

  return file && fd_target (fd, target, sizeof target) &&
         strcmp (target, file) == 0;
}

/* The log must hold every record whole, or the test cannot trust it. */
static void
append (const void *p, size_t n)
{
  const char *c = p;

  while (n > 0) {
    ssize_t r = write (log_fd, c, n);
    if (r <= 0) {
      perror ("power-log: write");
      abort ();
    }
    c += r;
    n -= r;
  }
}

/* Writes a record (and data, if not NULL) and returns its seq.  A
 * KIND_RETURNED record passes the seq it closes.
 */
static uint64_t
log_record (enum kind kind, uint32_t mode, uint64_t seq, uint64_t offset,
            uint64_t len, const void *data)
{
  struct record rec = { .kind = kind, .mode = mode, .seq = seq,
                        .offset = offset, .len = len };

  pthread_mutex_lock (&log_lock);
  if (log_fd == -1) {
    const char *path = getenv ("COW_POWER_LOG");
    log_fd = path ? open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
                          0600) : -1;
    if (log_fd == -1) {
      perror ("power-log: COW_POWER_LOG");
      abort ();
    }
  }
  if (kind != KIND_RETURNED && kind != KIND_SYNC_DONE)
    rec.seq = next_seq++;
  append (&rec, sizeof rec);
  if (data)
    append (data, len);
  pthread_mutex_unlock (&log_lock);
  return rec.seq;
}

ssize_t
pwrite (int fd, const void *buf, size_t count, off_t offset)
{
  uint64_t seq;
  ssize_t r;
  REAL (pwrite);

  if (!is_watched (fd))
    return real (fd, buf, count, offset);
  count_point ();
  seq = log_record (KIND_PWRITE, 0, 0, offset, count, buf);
  r = real (fd, buf, count, offset);
  log_record (KIND_RETURNED, 0, seq, 0, 0, NULL);
  return r;
}

ssize_t
pwrite64 (int fd, const void *buf, size_t count, off_t offset)
{
  return pwrite (fd, buf, count, offset);
}

int
fallocate (int fd, int mode, off_t offset, off_t len)
{
  uint64_t seq;
  int r;
  REAL (fallocate);

  if (!is_watched (fd))
    return real (fd, mode, offset, len);
  count_point ();
  seq = log_record (KIND_FALLOCATE, mode, 0, offset, len, NULL);
  r = real (fd, mode, offset, len);
  log_record (KIND_RETURNED, 0, seq, 0, 0, NULL);
  return r;
}

int
fallocate64 (int fd, int mode, off_t offset, off_t len)
{
  return fallocate (fd, mode, offset, len);
}

int
ftruncate (int fd, off_t len)
{
  uint64_t seq;
  int r;
  REAL (ftruncate);

  if (!is_watched (fd))
    return real (fd, len);
  count_point ();
  seq = log_record (KIND_FTRUNCATE, 0, 0, 0, len, NULL);
  r = real (fd, len);
  log_record (KIND_RETURNED, 0, seq, 0, 0, NULL);
  return r;
}

int
ftruncate64 (int fd, off_t len)
{
  return ftruncate (fd, len);
}

/* Whether to cut the power now: splitmix64 of the seed and a count of
 * the syncs, so that any thread may ask.
 */
static int
cut_now (void)
{
  static atomic_uint_fast64_t syncs;
  const char *n = getenv ("COW_POWER_CUT");
  const char *seed = getenv ("COW_POWER_SEED");
  uint64_t z;

  if (n == NULL || atoi (n) <= 0)
    return 0;
  z = (seed ? strtoull (seed, NULL, 10) : 0) +
    (atomic_fetch_add (&syncs, 1) + 1) * UINT64_C (0x9e3779b97f4a7c15);
  z = (z ^ (z >> 30)) * UINT64_C (0xbf58476d1ce4e5b9);
  z = (z ^ (z >> 27)) * UINT64_C (0x94d049bb133111eb);
  z ^= z >> 31;
  return z % (unsigned) atoi (n) == 0;
}

/* A sync covers the calls that returned before it started. */
static int
logged_sync (int fd, int (*real) (int))
{
  uint64_t seq;
  int r;

  if (!is_watched (fd))
    return real (fd);
  count_point ();
  seq = log_record (KIND_SYNC_START, 0, 0, 0, 0, NULL);
  if (cut_now ())
    raise (SIGKILL);
  r = real (fd);
  if (r == 0)
    log_record (KIND_SYNC_DONE, 0, seq, 0, 0, NULL);
  return r;
}

int
fdatasync (int fd)
{
  REAL (fdatasync);
  return logged_sync (fd, real);
}

int
fsync (int fd)
{
  REAL (fsync);
  return logged_sync (fd, real);
}
