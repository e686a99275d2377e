/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The throw-away store (store.h): a temporary file per stripe in
 * $TMPDIR, unlinked at once, so that the overlay vanishes with the
 * process however it ends.  Disk byte x lives at byte x of the file of
 * its chunk's stripe; the other stripes' chunks are holes in that file
 * that nothing writes.  Every file is extended, sparsely, to the disk's
 * size, so that no write has to change a file's size; a filesystem that
 * cannot hold that size leaves the files short, and the writes beyond
 * fail with EFBIG and a message saying why.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "fullio.h"
#include "punch.h"
#include "store.h"
#include "storeio.h"
#include "timedlock.h"

struct store_temp {
  struct store store;
  int *fds;                     /* stripe i's file, stripes.nr of them */
};

static struct store_temp *
temp_of (struct store *st)
{
  return (struct store_temp *) st;
}

static int
fd_of (struct store *st, uint64_t offset)
{
  return temp_of (st)->fds[stripes_of_offset (&st->stripes, offset)];
}

static int
temp_start (struct store *st, uint64_t size)
{
  unsigned i;

  for (i = 0; i < st->stripes.nr; ++i)
    if (ftruncate (temp_of (st)->fds[i], size) == -1)
      nbdkit_debug ("cow: overlay not sized to %" PRIu64 " bytes: %m", size);
  return 0;
}

static int
temp_read (struct store *st, void *buf, uint64_t count, uint64_t offset,
           int *err)
{
  uint64_t end = offset + count, at = offset, stop;
  char *p = buf;

  for (; at < end; at = stop) {
    stop = stripes_piece_end (&st->stripes, at, end);
    if (pread_full (fd_of (st, at), p, stop - at, at) == -1) {
      storeio_report ("read", count, offset, err);
      return -1;
    }
    p += stop - at;
  }
  return 0;
}

static int
temp_write_locked (struct store *st, const void *buf, uint64_t count,
                   uint64_t offset, int *err)
{
  uint64_t end = offset + count, at = offset, stop;
  const char *p = buf;

  for (; at < end; at = stop) {
    stop = stripes_piece_end (&st->stripes, at, end);
    if (storeio_write (fd_of (st, at), p, stop - at, at) == -1) {
      storeio_report (buf ? "write" : "write of zeros", count, offset, err);
      return -1;
    }
    if (p)
      p += stop - at;
  }
  return 0;
}

/* A punch of the stripes' files: the last errno of one that failed,
 * and the time waited for their locks.
 */
struct punch {
  struct store *st;
  int err;
  uint64_t waited;
};

/* Punches [from, to) of stripe i's file, once over the span of its
 * chunks in the range (the other stripes' chunks are holes in it
 * already), under its write lock.
 */
static int
punch_span (unsigned i, uint64_t from, uint64_t to, void *opaque)
{
  struct punch *punch = opaque;
  pthread_mutex_t *lock = &punch->st->stripes.locks[i];

  punch->waited += timed_lock (lock);
  if (punch_hole (temp_of (punch->st)->fds[i], from, to - from) == -1)
    punch->err = errno;
  pthread_mutex_unlock (lock);
  return 0;
}

static int
temp_punch (struct store *st, uint64_t count, uint64_t offset,
            uint64_t *waited)
{
  struct punch punch = { .st = st };

  stripes_each_span (&st->stripes, offset, count, punch_span, &punch);
  *waited += punch.waited;
  errno = punch.err;
  return punch.err ? -1 : 0;
}

static unsigned
temp_files (const struct store *st)
{
  return st->stripes.nr;
}

static uint64_t
temp_bytes (struct store *st)
{
  uint64_t bytes = 0;
  unsigned i;

  for (i = 0; i < st->stripes.nr; ++i)
    bytes += storeio_bytes (temp_of (st)->fds[i]);
  return bytes;
}

static void
temp_close (struct store *st)
{
  struct store_temp *t = temp_of (st);
  unsigned i;

  for (i = 0; i < st->stripes.nr; ++i)
    if (t->fds[i] >= 0)
      close (t->fds[i]);
  stripes_free (&st->stripes);
  free (t->fds);
  free (t);
}

static const struct store_ops temp_ops = {
  .start = temp_start,
  .read = temp_read,
  .write_locked = temp_write_locked,
  .punch = temp_punch,
  .files = temp_files,
  .bytes = temp_bytes,
  .close = temp_close,
};

/* A new temporary file in tmpdir, or -1 after nbdkit_error.  No
 * readahead: the overlay is read where clients ask, and blocks
 * allocated with FALLOC_FL_ZERO_RANGE are unwritten extents whose
 * readahead would only fill zeroed pages nobody asked for.
 */
static int
temp_file (const char *tmpdir)
{
  char *template;
  int fd;

  if (asprintf (&template, "%s/nbdkit-cow-XXXXXX", tmpdir) == -1) {
    nbdkit_error ("cow: asprintf: %m");
    return -1;
  }
  /* mkostemp creates the file 0600. */
  fd = mkostemp (template, O_CLOEXEC);
  if (fd == -1)
    nbdkit_error ("cow: cannot create the overlay in TMPDIR=%s: %m", tmpdir);
  else {
    unlink (template);
    posix_fadvise (fd, 0, 0, POSIX_FADV_RANDOM);
  }
  free (template);
  return fd;
}

struct store *
store_temp_new (const char *tmpdir, unsigned nr_stripes, unsigned block_shift)
{
  struct store_temp *t = calloc (1, sizeof *t);
  unsigned i;

  if (t == NULL || (t->fds = calloc (nr_stripes, sizeof *t->fds)) == NULL ||
      stripes_init (&t->store.stripes, nr_stripes, block_shift) == -1) {
    nbdkit_error ("cow: calloc: %m");
    if (t)
      free (t->fds);
    free (t);
    return NULL;
  }
  t->store.ops = &temp_ops;
  for (i = 0; i < nr_stripes; ++i)
    t->fds[i] = -1;
  for (i = 0; i < nr_stripes; ++i) {
    t->fds[i] = temp_file (tmpdir);
    if (t->fds[i] == -1) {
      temp_close (&t->store);
      return NULL;
    }
  }
  return &t->store;
}
