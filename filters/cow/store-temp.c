/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The throw-away store (store.h): a region of the temporary files
 * that all throw-away overlays of the server share (tempfiles.h), one
 * file per stripe.  Disk byte x lives at byte x of the region, in the
 * file of its chunk's stripe; the other stripes' chunks are holes in
 * that file that nothing writes.
 */

#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include <nbdkit-filter.h>

#include "checks.h"
#include "fullio.h"
#include "punch.h"
#include "store.h"
#include "storeio.h"
#include "tempfiles.h"

struct store_temp {
  struct store store;
  struct temp_files *files;
  /* Set by start: the files of the region (stripe i's is fds[i]), and
   * where it starts in them.
   */
  const int *fds;
  uint64_t base, size;
};

static struct store_temp *
temp_of (struct store *st)
{
  return (struct store_temp *) st;
}

static int
fd_of (struct store *st, uint64_t offset)
{
  return temp_of (st)->fds[stripes_of_offset (st->stripes, offset)];
}

static int
temp_start (struct store *st, uint64_t size, uint64_t *overhead)
{
  struct store_temp *t = temp_of (st);

  *overhead = 0;
  if (temp_files_region (t->files, size, &t->fds, &t->base) == -1)
    return -1;
  t->size = size;
  return 0;
}

static int
temp_read (struct store *st, void *buf, uint64_t count, uint64_t offset,
           int *err)
{
  uint64_t end = offset + count, at = offset, stop;
  char *p = buf;

  for (; at < end; at = stop) {
    stop = stripes_piece_end (st->stripes, at, end);
    if (pread_full (fd_of (st, at), p, stop - at, temp_of (st)->base + at)
        == -1) {
      storeio_report ("read", count, offset, err);
      return -1;
    }
    p += stop - at;
  }
  return 0;
}

static int
temp_write (struct store *st, const void *buf, uint64_t count,
            uint64_t offset, int *err)
{
  uint64_t end = offset + count, at = offset, stop;
  const char *p = buf;

  CHECK (stripes_held (st->stripes, offset, count));
  for (; at < end; at = stop) {
    stop = stripes_piece_end (st->stripes, at, end);
    if (storeio_write (fd_of (st, at), p, stop - at, temp_of (st)->base + at)
        == -1) {
      storeio_report (buf ? "write" : "write of zeros", count, offset, err);
      return -1;
    }
    if (p)
      p += stop - at;
  }
  return 0;
}

/* A punch of the stripes' files: the last errno of one that failed. */
struct punch {
  struct store_temp *t;
  int err;
};

/* Punches [from, to) of stripe i's file, once over the span of its
 * chunks in the range (the other stripes' chunks are holes in it
 * already).
 */
static int
punch_span (unsigned i, uint64_t from, uint64_t to, void *opaque)
{
  struct punch *punch = opaque;

  if (punch_hole (punch->t->fds[i], punch->t->base + from, to - from) == -1)
    punch->err = errno;
  return 0;
}

static int
temp_punch (struct store *st, uint64_t count, uint64_t offset)
{
  struct punch punch = { .t = temp_of (st) };

  CHECK (stripes_held (st->stripes, offset, count));
  stripes_each_span (st->stripes, offset, count, punch_span, &punch);
  errno = punch.err;
  return punch.err ? -1 : 0;
}

/* The files are the server's: each export's statistics show them all. */
static unsigned
temp_files (struct store *st)
{
  return temp_files_count (temp_of (st)->files);
}

static uint64_t
temp_bytes (struct store *st)
{
  return temp_files_bytes (temp_of (st)->files);
}

/* The region, if the overlay had one, is given back to the files. */
static int
temp_close (struct store *st)
{
  struct store_temp *t = temp_of (st);

  if (t->fds)
    temp_files_release (t->files, t->fds, t->base, t->size);
  free (t);
  return 0;
}

static const struct store_ops temp_ops = {
  .start = temp_start,
  .read = temp_read,
  .write = temp_write,
  .punch = temp_punch,
  .files = temp_files,
  .bytes = temp_bytes,
  .close = temp_close,
};

struct store *
store_temp_new (struct temp_files *files, const struct stripes *stripes)
{
  struct store_temp *t = calloc (1, sizeof *t);

  CHECK (stripes->nr == files->nr);
  if (t == NULL) {
    nbdkit_error ("cow: calloc: %m");
    return NULL;
  }
  t->store.ops = &temp_ops;
  t->store.stripes = stripes;
  t->files = files;
  return &t->store;
}
