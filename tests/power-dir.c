/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A preloaded shim (LD_PRELOAD=.../power-dir.so nbdcow ...) that logs
 * what a process changes in one folder, its files' writes and the
 * folder's names, and every sync of either, so that a test can build
 * what the folder may hold after a power loss at the moment the
 * process is killed (tests/powerdir.py, tests/prune-power.py).
 *
 *   COW_POWER_DIR=PATH    the folder to watch (absolute, no symlinks)
 *   COW_POWER_LOG=PATH    the log, appended to
 *   COW_POWER_CUT_AT=N    kill the process at its Nth persistence point
 *                         in the folder (each write, truncate and sync
 *                         of a file, each name made, moved or removed,
 *                         each sync of the folder), before the call
 *
 * The log is text, a line an event, each with its number in order:
 *
 *   SEQ write INO OFFSET LENGTH    a write to file INO, once returned
 *   SEQ truncate INO LENGTH        once returned
 *   SEQ sync INO                   a sync of file INO (0: the folder)
 *                                  starts
 *   SEQ synced START               the sync that started at START
 *                                  succeeded
 *   SEQ link INO NAME              file INO took NAME (linkat)
 *   SEQ rename FROM TO             once done
 *   SEQ unlink NAME                once done
 *
 * A change is logged when it has returned, so a sync covers the
 * changes logged before it started.  The bytes written are not logged:
 * each file as the kill leaves it holds them, and the test knows the
 * files as they were before.  Names that open makes are not logged
 * either: the test runs where files are made nameless (O_TMPFILE) and
 * named by linkat.
 */

#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "cut-point.h"
#include "fd-target.h"

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t next_seq;       /* under log_lock */
static int log_fd = -1;         /* opened under log_lock */

/* Appends one line, "SEQ " then fmt, and returns SEQ. */
__attribute__ ((format (printf, 1, 2)))
static uint64_t
log_line (const char *fmt, ...)
{
  char line[2 * PATH_MAX + 64];
  va_list ap;
  uint64_t seq;
  int n;

  pthread_mutex_lock (&log_lock);
  if (log_fd == -1) {
    const char *path = getenv ("COW_POWER_LOG");
    log_fd = path ? open (path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC,
                          0600) : -1;
    if (log_fd == -1) {
      perror ("power-dir: COW_POWER_LOG");
      abort ();
    }
  }
  seq = next_seq++;
  n = snprintf (line, sizeof line, "%" PRIu64 " ", seq);
  va_start (ap, fmt);
  n += vsnprintf (line + n, sizeof line - n, fmt, ap);
  va_end (ap);
  if (n >= (int) sizeof line - 1 || write (log_fd, line, n) != n) {
    perror ("power-dir: write");
    abort ();
  }
  pthread_mutex_unlock (&log_lock);
  return seq;
}

static const char *
watched_dir (void)
{
  return getenv ("COW_POWER_DIR");
}

/* The inode of fd if it is a file in the folder, 0 if it is the
 * folder itself, -1 otherwise.
 */
static int64_t
watched_fd (int fd)
{
  const char *dir = watched_dir ();
  char target[PATH_MAX];
  size_t n;
  struct stat st;

  if (dir == NULL || !fd_target (fd, target, sizeof target))
    return -1;
  if (strcmp (target, dir) == 0)
    return 0;
  n = strlen (dir);
  if (strncmp (target, dir, n) != 0 || target[n] != '/' ||
      strchr (target + n + 1, '/') != NULL || fstat (fd, &st) == -1)
    return -1;
  return st.st_ino;
}

/* Fills name with path's last part if path names something in the
 * folder (which need not exist); false otherwise.
 */
static bool
watched_name (const char *path, char name[NAME_MAX + 1])
{
  const char *dir = watched_dir ();
  char copy[PATH_MAX], real_dir[PATH_MAX];

  if (dir == NULL || strlen (path) >= sizeof copy)
    return false;
  strcpy (copy, path);
  if (strlen (basename (copy)) > NAME_MAX)
    return false;
  strcpy (name, basename (copy));
  strcpy (copy, path);
  return realpath (dirname (copy), real_dir) && strcmp (real_dir, dir) == 0;
}

ssize_t
pwrite (int fd, const void *buf, size_t count, off_t offset)
{
  int64_t ino = watched_fd (fd);
  ssize_t r;
  REAL (pwrite);

  if (ino <= 0)
    return real (fd, buf, count, offset);
  count_point ();
  r = real (fd, buf, count, offset);
  if (r > 0)
    log_line ("write %" PRId64 " %" PRId64 " %zd\n", ino, (int64_t) offset, r);
  return r;
}

ssize_t
pwrite64 (int fd, const void *buf, size_t count, off_t offset)
{
  return pwrite (fd, buf, count, offset);
}

int
ftruncate (int fd, off_t length)
{
  int64_t ino = watched_fd (fd);
  int r;
  REAL (ftruncate);

  if (ino <= 0)
    return real (fd, length);
  count_point ();
  r = real (fd, length);
  if (r == 0)
    log_line ("truncate %" PRId64 " %" PRId64 "\n", ino, (int64_t) length);
  return r;
}

int
ftruncate64 (int fd, off_t length)
{
  return ftruncate (fd, length);
}

static int
logged_sync (int fd, int (*real) (int))
{
  int64_t ino = watched_fd (fd);
  uint64_t seq;
  int r;

  if (ino < 0)
    return real (fd);
  count_point ();
  seq = log_line ("sync %" PRId64 "\n", ino);
  r = real (fd);
  if (r == 0)
    log_line ("synced %" PRIu64 "\n", seq);
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

int
linkat (int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
        int flags)
{
  char name[NAME_MAX + 1];
  struct stat st;
  bool watched = newdirfd == AT_FDCWD && watched_name (newpath, name);
  int r;
  REAL (linkat);

  if (!watched)
    return real (olddirfd, oldpath, newdirfd, newpath, flags);
  count_point ();
  r = real (olddirfd, oldpath, newdirfd, newpath, flags);
  if (r == 0 && stat (newpath, &st) == 0)
    log_line ("link %" PRIu64 " %s\n", (uint64_t) st.st_ino, name);
  return r;
}

int
rename (const char *oldpath, const char *newpath)
{
  char from[NAME_MAX + 1], to[NAME_MAX + 1];
  bool watched = watched_name (oldpath, from) && watched_name (newpath, to);
  int r;
  REAL (rename);

  if (!watched)
    return real (oldpath, newpath);
  count_point ();
  r = real (oldpath, newpath);
  if (r == 0)
    log_line ("rename %s %s\n", from, to);
  return r;
}

int
unlink (const char *path)
{
  char name[NAME_MAX + 1];
  bool watched = watched_name (path, name);
  int r;
  REAL (unlink);

  if (!watched)
    return real (path);
  count_point ();
  r = real (path);
  if (r == 0)
    log_line ("unlink %s\n", name);
  return r;
}
