/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The qcow2 file nbdcow export and backup write (outfile.h): nameless
 * until complete, then named in one step.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirpath.h"
#include "nbdcow.h"
#include "outfile.h"
#include "qcow2.h"

/* Where nameless files are named from (link_fd). */
#define PROC_FDS "/proc/self/fd"

/* A file with no name in dir, or -1 with errno set: EOPNOTSUPP if the
 * filesystem has no such files or, without /proc, it could not be named
 * later; EISDIR from a kernel without O_TMPFILE.
 */
static int
open_nameless (const char *dir)
{
  if (access (PROC_FDS, X_OK) == -1) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return open (dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
}

/* The file of out_create where it cannot be nameless: OUT, or with
 * keep_out OUT.nbdcow-PID.  Returns its descriptor, or -1 with errno
 * set.
 */
static int
open_named (struct out_file *o, const char *out, bool keep_out)
{
  if (keep_out &&
      asprintf (&o->temp, "%s.nbdcow-%ld", out, (long) getpid ()) == -1) {
    o->temp = NULL;
    errno = ENOMEM;
    return -1;
  }
  o->named = true;
  return open (o->temp ? o->temp : out,
               O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
}

int
out_create (struct out_file *o, const char *out, bool keep_out)
{
  o->path = out;
  o->named = false;
  o->temp = NULL;
  o->dir = dir_of (out);
  if (o->dir == NULL) {
    nbdcow_error ("%s: malloc: %m", out);
    return -1;
  }
  o->fd = open_nameless (o->dir);
  if (o->fd >= 0)
    return 0;
  if (errno == EOPNOTSUPP || errno == EISDIR)
    o->fd = open_named (o, out, keep_out);
  if (o->fd == -1) {
    nbdcow_error ("%s: %m", out);
    free (o->dir);
    return -1;
  }
  return 0;
}

/* Gives the nameless file of fd the name name. */
static int
link_fd (int fd, const char *name)
{
  char proc[64];

  snprintf (proc, sizeof proc, PROC_FDS "/%d", fd);
  return linkat (AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW);
}

int
out_publish (struct out_file *o)
{
  char *tmp = NULL;
  int r = o->temp ? rename (o->temp, o->path)
    : o->named ? 0 : link_fd (o->fd, o->path);

  if (r == -1 && errno == EEXIST) {
    if (asprintf (&tmp, "%s.nbdcow-%ld", o->path, (long) getpid ()) == -1) {
      nbdcow_error ("%s: malloc: %m", o->path);
      return -1;
    }
    r = link_fd (o->fd, tmp);
    if (r == 0 && (r = rename (tmp, o->path)) == -1)
      unlink (tmp);
  }
  free (tmp);
  if (r == -1) {
    nbdcow_error ("%s: cannot name the exported file: %m", o->path);
    return -1;
  }
  if (sync_dir (o->dir) == -1) {
    nbdcow_error ("%s: fsync: %m", o->dir);
    return -1;
  }
  return 0;
}

int
out_close (struct out_file *o, bool complete)
{
  int r = 0;

  if (close (o->fd) == -1 && complete) {
    nbdcow_error ("%s: close: %m", o->path);
    r = -1;
  }
  if (o->named && (!complete || r == -1))
    unlink (o->temp ? o->temp : o->path);
  free (o->temp);
  free (o->dir);
  return r;
}

char *
backing_name (const char *base, const char *out)
{
  char *dir = NULL, *name = NULL;

  if (base[0] == '/' && (dir = dir_of (out)) != NULL)
    name = path_below (dir, base);
  if (name == NULL && (base[0] != '/' || dir != NULL))
    name = strdup (base);
  free (dir);
  if (name == NULL)
    nbdcow_error ("--base=%s: malloc: %m", base);
  return name;
}

int
open_backing (const char *base, const char *out, struct stat *st,
              char **path_out, enum backing_named named)
{
  char *dir = dir_of (out), *path = NULL;
  struct stat ignored;
  int fd = -1;

  if (dir == NULL ||
      asprintf (&path, "%s%s%s", base[0] == '/' ? "" : dir,
                base[0] == '/' || strcmp (dir, "/") == 0 ? "" : "/",
                base) == -1) {
    nbdcow_error ("--base=%s: malloc: %m", base);
    path = NULL;
  }
  else if (!qcow2_backing_fits (base))
    ;                           /* it said why */
  else if ((fd = open (path, O_RDONLY | O_CLOEXEC)) == -1 ||
           fstat (fd, st ? st : &ignored) == -1) {
    if (named == NAMED_BY_BASE)
      nbdcow_error ("--base=%s: %s: %m", base, path);
    else if (named == NAMED_BY_USER)
      nbdcow_error ("%s: %m", path);
    else
      nbdcow_error ("%s: its backing file %s: %s: %m", out, base, path);
    if (fd >= 0)
      close (fd);
    fd = -1;
  }
  free (dir);
  if (fd >= 0 && path_out)
    *path_out = path;
  else
    free (path);
  return fd;
}

const char *
file_name (const char *path)
{
  const char *slash = strrchr (path, '/');

  return slash ? slash + 1 : path;
}
