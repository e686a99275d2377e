/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The targets of nbdcow commit: a file, or an NBD export. */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libnbd.h>

#include "fullio.h"
#include "nbdcow.h"
#include "punch.h"
#include "target.h"

/* Writes of zeros where a target cannot zero ranges, a piece at a time. */
#define ZERO_PIECE (1024 * 1024)
static const char zero_buf[ZERO_PIECE];

struct target {
  char *name;
  uint64_t size;
  unsigned connections;
  int fd;                       /* a file, or -1 */
  struct nbd_handle **nbd;      /* an NBD export: connections handles */
  bool can_zero, can_flush;     /* of the NBD export */
};

static bool
is_uri (const char *name)
{
  return strstr (name, "://") != NULL;
}

/* Sets the size of a file target from its open fd. */
static int
file_size (struct target *t)
{
  /* lseek finds the size of block devices too. */
  off_t end = lseek (t->fd, 0, SEEK_END);

  if (end == -1) {
    nbdcow_error ("%s: lseek: %m", t->name);
    return -1;
  }
  t->size = end;
  return 0;
}

/* Whether the file starts as a qcow2 image does, which commit would
 * overwrite as raw bytes.
 */
static bool
is_qcow2 (int fd)
{
  char magic[4];

  return pread (fd, magic, sizeof magic, 0) == sizeof magic &&
         memcmp (magic, "QFI\xfb", sizeof magic) == 0;
}

static int
open_file (struct target *t)
{
  t->fd = open (t->name, O_RDWR | O_CLOEXEC);
  if (t->fd == -1) {
    nbdcow_error ("%s: %m", t->name);
    return -1;
  }
  if (is_qcow2 (t->fd)) {
    nbdcow_error ("%s: a qcow2 image, which nbdcow writes only over NBD: "
                  "serve it (qemu-nbd -f qcow2 --socket=/tmp/q.sock %s) and "
                  "give the URI (nbd+unix:///?socket=/tmp/q.sock)",
                  t->name, t->name);
    return -1;
  }
  return file_size (t);
}

static struct nbd_handle *
connect_nbd (const char *uri)
{
  struct nbd_handle *h = nbd_create ();

  if (h == NULL || nbd_connect_uri (h, uri) == -1) {
    nbdcow_error ("%s: %s", uri, nbd_get_error ());
    nbd_close (h);
    return NULL;
  }
  return h;
}

static int
open_nbd (struct target *t, unsigned connections)
{
  int64_t size;
  unsigned i;

  t->nbd = calloc (connections, sizeof *t->nbd);
  if (t->nbd == NULL) {
    nbdcow_error ("%s: calloc: %m", t->name);
    return -1;
  }
  t->nbd[0] = connect_nbd (t->name);
  if (t->nbd[0] == NULL)
    return -1;
  t->connections = 1;
  if (nbd_is_read_only (t->nbd[0]) == 1) {
    nbdcow_error ("%s: the NBD export is read-only", t->name);
    return -1;
  }
  size = nbd_get_size (t->nbd[0]);
  if (size == -1) {
    nbdcow_error ("%s: %s", t->name, nbd_get_error ());
    return -1;
  }
  t->size = size;
  t->can_zero = nbd_can_zero (t->nbd[0]) == 1;
  t->can_flush = nbd_can_flush (t->nbd[0]) == 1;
  /* Without multi-conn a flush on one connection need not cover the
   * writes of another: use one, as nbdcopy does.
   */
  if (nbd_can_multi_conn (t->nbd[0]) != 1)
    return 0;
  for (i = 1; i < connections; ++i) {
    t->nbd[i] = connect_nbd (t->name);
    if (t->nbd[i] == NULL)
      return -1;
    t->connections++;
  }
  return 0;
}

/* A target named name with nothing open yet, or NULL after a message. */
static struct target *
new_target (const char *name, unsigned connections)
{
  struct target *t = calloc (1, sizeof *t);

  if (t == NULL || (t->name = strdup (name)) == NULL) {
    nbdcow_error ("%s: calloc: %m", name);
    free (t);
    return NULL;
  }
  t->fd = -1;
  t->connections = connections;
  return t;
}

struct target *
target_open (const char *name, unsigned connections)
{
  struct target *t = new_target (name, connections);

  if (t == NULL)
    return NULL;
  if ((is_uri (name) ? open_nbd (t, connections) : open_file (t)) == -1) {
    target_close (t);
    return NULL;
  }
  return t;
}

struct target *
target_open_fd (const char *name, int fd, unsigned connections)
{
  struct target *t = new_target (name, connections);

  if (t == NULL)
    return NULL;
  t->fd = fcntl (fd, F_DUPFD_CLOEXEC, 0);
  if (t->fd == -1)
    nbdcow_error ("%s: fcntl: %m", name);
  if (t->fd == -1 || file_size (t) == -1) {
    target_close (t);
    return NULL;
  }
  return t;
}

void
target_close (struct target *t)
{
  unsigned i;

  if (t->nbd) {
    for (i = 0; i < t->connections; ++i)
      if (t->nbd[i]) {
        nbd_shutdown (t->nbd[i], 0);
        nbd_close (t->nbd[i]);
      }
    free (t->nbd);
  }
  if (t->fd >= 0)
    close (t->fd);
  free (t->name);
  free (t);
}

const char *
target_name (const struct target *t)
{
  return t->name;
}

bool
target_is_file (const struct target *t, int fd)
{
  struct stat a, b;

  return t->fd >= 0 && fstat (t->fd, &a) == 0 && fstat (fd, &b) == 0 &&
         same_file (&a, &b);
}

uint64_t
target_size (const struct target *t)
{
  return t->size;
}

unsigned
target_connections (const struct target *t)
{
  return t->connections;
}

static int
write_error (struct target *t, const char *what, uint64_t count,
             uint64_t offset, const char *why)
{
  nbdcow_error ("%s: %s of %" PRIu64 " bytes at %" PRIu64 ": %s", t->name,
                what, count, offset, why);
  return -1;
}

int
target_write (struct target *t, unsigned conn, const void *buf,
              uint64_t count, uint64_t offset)
{
  if (t->nbd) {
    if (nbd_pwrite (t->nbd[conn], buf, count, offset, 0) == -1)
      return write_error (t, "write", count, offset, nbd_get_error ());
    return 0;
  }
  if (pwrite_full (t->fd, buf, count, offset) == -1)
    return write_error (t, "write", count, offset, strerror (errno));
  return 0;
}

int
target_copy_from (struct target *t, int fd, uint64_t in_offset,
                  uint64_t count, uint64_t offset)
{
  loff_t in = in_offset, out = offset;

  if (t->nbd)
    return 1;
  while (count > 0) {
    ssize_t n = copy_file_range (fd, &in, t->fd, &out, count, 0);

    if (n == -1 && in == (loff_t) in_offset &&
        (errno == EXDEV || errno == EOPNOTSUPP || errno == EINVAL ||
         errno == ENOSYS))
      return 1;                 /* nothing copied yet: read and write */
    if (n == -1)
      return write_error (t, "copy", count, out, strerror (errno));
    if (n == 0)
      return write_error (t, "copy", count, out, "the overlay ended early");
    count -= n;
  }
  return 0;
}

static int
write_zeros (struct target *t, unsigned conn, uint64_t count, uint64_t offset)
{
  while (count > 0) {
    uint64_t n = count < ZERO_PIECE ? count : ZERO_PIECE;

    if (target_write (t, conn, zero_buf, n, offset) == -1)
      return -1;
    count -= n;
    offset += n;
  }
  return 0;
}

/* A file: a hole where the filesystem (or device) can punch one, else
 * zeros allocated without writing them, else written.
 */
static int
zero_file (struct target *t, unsigned conn, uint64_t count, uint64_t offset)
{
  if (punch_hole (t->fd, offset, count) == 0 ||
      fallocate (t->fd, FALLOC_FL_ZERO_RANGE, offset, count) == 0)
    return 0;
  return write_zeros (t, conn, count, offset);
}

int
target_zero (struct target *t, unsigned conn, uint64_t count, uint64_t offset)
{
  if (t->nbd == NULL)
    return zero_file (t, conn, count, offset);
  if (!t->can_zero)
    return write_zeros (t, conn, count, offset);
  /* No NO_HOLE flag: the server may trim. */
  if (nbd_zero (t->nbd[conn], count, offset, 0) == -1)
    return write_error (t, "write zeroes", count, offset, nbd_get_error ());
  return 0;
}

int
target_flush (struct target *t)
{
  unsigned i;

  if (t->nbd == NULL) {
    if (fdatasync (t->fd) == -1) {
      nbdcow_error ("%s: fdatasync: %m", t->name);
      return -1;
    }
    return 0;
  }
  if (!t->can_flush)
    return 0;
  for (i = 0; i < t->connections; ++i)
    if (nbd_flush (t->nbd[i], 0) == -1) {
      nbdcow_error ("%s: flush: %s", t->name, nbd_get_error ());
      return -1;
    }
  return 0;
}
