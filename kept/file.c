/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A kept overlay's file: opening and locking it, creating it, its
 * header's flags, the crash-safe flush, where its blocks' data lies
 * (kept.h).
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirpath.h"
#include "fullio.h"
#include "internal.h"
#include "iszero.h"

/* The header's fields that change after creation (version, checksum,
 * flags, recoveries) all lie in its first sector.
 */
#define HEADER_SECTOR 512

int
kept_fail (struct kept_overlay *ko, bool damaged, const char *fmt, ...)
{
  int saved = errno;
  size_t n;
  va_list ap;

  snprintf (ko->why, sizeof ko->why, "%s: ", ko->path ? ko->path : "");
  n = strlen (ko->why);
  errno = saved;
  va_start (ap, fmt);
  vsnprintf (ko->why + n, sizeof ko->why - n, fmt, ap);
  va_end (ap);
  ko->damaged = damaged;
  errno = saved;
  return -1;
}

uint64_t
kept_blocks (const struct kept_overlay *ko)
{
  return blockgeom_blocks (&ko->header.layout.geom);
}

static int
read_header (struct kept_overlay *ko)
{
  uint8_t *buf = malloc (KEPT_HEADER_SIZE);
  const char *why;
  enum kept_bad bad;
  ssize_t r;

  if (buf == NULL)
    return kept_fail (ko, false, "malloc: %m");
  r = pread (ko->fd, buf, KEPT_HEADER_SIZE, 0);
  if (r == -1) {
    free (buf);
    return kept_fail (ko, false, "read: %m");
  }
  if (r < KEPT_HEADER_SIZE) {
    /* A cut-off overlay still starts with the magic. */
    bool ours = r >= 8 && memcmp (buf, "nbdkCOW\n", 8) == 0;
    free (buf);
    return kept_fail (ko, ours, ours ? "not a cow overlay (truncated header)"
                 : "not a cow overlay (bad magic)");
  }
  bad = kept_header_decode (buf, &ko->header, &why);
  free (buf);
  if (bad != KEPT_SOUND)
    return kept_fail (ko, bad == KEPT_DAMAGED, "%s", why);
  ko->has_header = true;
  return 0;
}

/* Whether the file at fd holds no data at all, every byte a hole: a
 * file kept_create cut to length whose header never reached the disk
 * (power lost between the two), in which nothing was ever written.
 */
static bool
holds_no_data (int fd)
{
  return lseek (fd, 0, SEEK_DATA) == -1 && errno == ENXIO;
}

/* The checks of kept_open once the file is open. */
static int
lock_and_read (struct kept_overlay *ko, enum kept_mode mode)
{
  struct stat st;

  /* The lock dies with the descriptor, so with the process too. */
  if (flock (ko->fd, (mode == KEPT_READ ? LOCK_SH : LOCK_EX) | LOCK_NB)
      == -1) {
    if (errno == EWOULDBLOCK)
      return kept_fail (ko, false,
                        "in use: locked by another process (nbdkit or nbdcow)");
    return kept_fail (ko, false, "flock: %m");
  }
  if (fstat (ko->fd, &st) == -1)
    return kept_fail (ko, false, "fstat: %m");
  if (!S_ISREG (st.st_mode))
    return kept_fail (ko, false, "not a regular file");
  /* An empty file is a new overlay, laid out once the size is known;
   * so is one that holds no data at all (kept_create lays it out
   * again).
   */
  if (st.st_size == 0 || (mode == KEPT_CREATE && holds_no_data (ko->fd))) {
    if (mode == KEPT_CREATE)
      return 0;
    return kept_fail (ko, false, "empty: not a cow overlay yet, so it holds "
                      "no changes (nbdkit lays a kept file out when a "
                      "client first opens its export)");
  }
  return read_header (ko);
}

int
kept_open (struct kept_overlay *ko, const char *path, enum kept_mode mode)
{
  int flags = mode == KEPT_READ ? O_RDONLY : O_RDWR;

  memset (ko, 0, sizeof *ko);
  ko->fd = -1;
  ko->path = strdup (path);
  if (ko->path == NULL)
    return kept_fail (ko, false, "strdup: %m");
  if (mode == KEPT_CREATE)
    flags |= O_CREAT;
  ko->fd = open (path, flags | O_CLOEXEC, 0600);
  if (ko->fd == -1 || lock_and_read (ko, mode) == -1) {
    if (ko->fd == -1)
      kept_fail (ko, false, "%m");
    kept_close (ko);
    return -1;
  }
  return 0;
}

void
kept_close (struct kept_overlay *ko)
{
  kept_slots_free (&ko->slots);
  slotmap_free (&ko->parts);
  slotmap_free (&ko->where);
  kept_log_free (&ko->log);
  if (ko->fd >= 0)
    close (ko->fd);
  ko->fd = -1;
  free (ko->path);
  ko->path = NULL;
}

int
kept_create (struct kept_overlay *ko, uint32_t block_size,
             uint64_t base_size, const char *name)
{
  struct kept_header *h = &ko->header;
  uint8_t *buf;
  int r;

  if (strlen (name) > KEPT_NAME_MAX)
    return kept_fail (ko, false, "export name longer than %d bytes",
                      KEPT_NAME_MAX);
  buf = malloc (KEPT_HEADER_SIZE);
  if (buf == NULL)
    return kept_fail (ko, false, "malloc: %m");
  kept_layout (KEPT_VERSION, block_size, base_size, &h->layout);
  h->version = KEPT_VERSION;
  h->flags = KEPT_OPEN;
  h->stale_count = 0;
  h->recoveries = 0;
  memset (&h->facts, 0, sizeof h->facts);
  strcpy (h->name, name);
  kept_header_encode (h, buf);
  r = ftruncate (ko->fd, kept_min_length (ko));
  if (r == 0)
    r = fsync (ko->fd);
  if (r == 0)
    r = pwrite_full (ko->fd, buf, KEPT_HEADER_SIZE, 0);
  if (r == 0)
    r = fsync (ko->fd);
  if (r == 0)
    r = sync_dir_of (ko->path);
  free (buf);
  if (r == -1)
    return kept_fail (ko, false, "cannot create the overlay: %m");
  ko->has_header = true;
  kept_log_start (&ko->log);
  if (h->layout.packed && kept_slots_init (&ko->slots, kept_blocks (ko)) == -1)
    return kept_fail (ko, false, "cannot hold the block slots: %m");
  if ((h->layout.part_shift &&
       slotmap_init (&ko->parts, kept_blocks (ko)) == -1) ||
      (h->layout.places &&
       slotmap_init (&ko->where, kept_blocks (ko)) == -1))
    return kept_fail (ko, false, "cannot hold the block states: %m");
  return 0;
}

uint64_t
kept_min_length (const struct kept_overlay *ko)
{
  const struct kept_layout *l = &ko->header.layout;

  return l->data_offset + (l->packed ? 0 : l->geom.size);
}

int
kept_check_length (struct kept_overlay *ko)
{
  struct stat st;

  if (fstat (ko->fd, &st) == -1)
    return kept_fail (ko, false, "fstat: %m");
  if ((uint64_t) st.st_size < kept_min_length (ko))
    return kept_fail (ko, true, "truncated: shorter than its header says "
                 "(%" PRIu64 " bytes, not %" PRIu64 ")",
                 (uint64_t) st.st_size, kept_min_length (ko));
  return 0;
}

/* Writes the header's first sector, where all that changes after
 * creation lies, and syncs it.
 */
static int
write_first_sector (struct kept_overlay *ko)
{
  uint8_t *buf = malloc (KEPT_HEADER_SIZE);
  int r;

  if (buf == NULL)
    return kept_fail (ko, false, "malloc: %m");
  kept_header_encode (&ko->header, buf);
  r = pwrite_full (ko->fd, buf, HEADER_SECTOR, 0);
  if (r == 0)
    r = fdatasync (ko->fd);
  free (buf);
  if (r == -1)
    return kept_fail (ko, false, "cannot write the header: %m");
  return 0;
}

int
kept_set_flags (struct kept_overlay *ko, uint32_t flags, uint32_t recoveries)
{
  /* Version 1 had no flags: its files become version 2. */
  if (ko->header.version < 2)
    ko->header.version = 2;
  ko->header.flags = flags;
  ko->header.recoveries = recoveries;
  return write_first_sector (ko);
}

int
kept_set_facts (struct kept_overlay *ko, const struct kept_facts *facts)
{
  if (ko->header.version < 2)
    return 0;
  ko->header.facts = *facts;
  return write_first_sector (ko);
}

int
kept_read_area (struct kept_overlay *ko, uint64_t offset, uint64_t length,
                const char *what, kept_chunk_fn *fn, void *opaque)
{
  uint64_t chunk = PAGES_PER_IO * KEPT_STATE_PAGE, at;
  uint8_t *buf = malloc (chunk);
  int r = 0;

  if (buf == NULL)
    return kept_fail (ko, false, "malloc: %m");
  for (at = 0; at < length && r == 0; at += chunk) {
    uint64_t len = length - at < chunk ? length - at : chunk;

    if (pread_full (ko->fd, buf, len, offset + at) == -1)
      r = kept_fail (ko, false, "cannot read the %s: %m", what);
    else if (!is_zero ((const char *) buf, len))
      r = fn (ko, buf, at, len, opaque);
  }
  free (buf);
  return r;
}

/* The kept_chunk_fn of kept_zero_area: zeros over the chunk. */
static int
zero_chunk (struct kept_overlay *ko, const uint8_t *buf, uint64_t at,
            uint64_t len, void *opaque)
{
  const uint64_t *offset = opaque;
  uint8_t *zero = calloc (1, len);
  int r = zero ? pwrite_full (ko->fd, zero, len, *offset + at) : -1;

  free (zero);
  return r == 0 ? 0 : kept_fail (ko, false, "write: %m");
}

int
kept_zero_area (struct kept_overlay *ko, uint64_t offset, uint64_t length,
                const char *what)
{
  return kept_read_area (ko, offset, length, what, zero_chunk, &offset);
}

/* Writes n pages of metadata from buf and makes them durable: no
 * sync if there are none.  Pages that lie one after another in the
 * file (and so in buf, taken in the file's order) go in one write.
 */
static int
write_pages (struct kept_overlay *ko, const uint64_t *at, const uint8_t *buf,
             unsigned n)
{
  unsigned i, j;

  if (n == 0)
    return 0;
  for (i = 0; i < n; i = j) {
    for (j = i + 1; j < n && at[j] == at[j - 1] + KEPT_STATE_PAGE; ++j)
      ;
    if (pwrite_full (ko->fd, buf + (uint64_t) i * KEPT_STATE_PAGE,
                     (uint64_t) (j - i) * KEPT_STATE_PAGE, at[i]) == -1)
      return -1;
  }
  return fdatasync (ko->fd);
}

/* Each round: take the states (and marks) of some dirty pages, sync
 * the data they point to, then write and sync the pages.  States
 * taken before the data sync only ever name data written before it.
 * With nothing dirty the data sync is the flush's only one: writes
 * into blocks in the overlay change no state.
 */
int
kept_flush (struct kept_overlay *ko, kept_take_pages *take,
            kept_redirty_pages *redirty, void *opaque)
{
  uint64_t *at = malloc (PAGES_PER_IO * sizeof *at), next = 0;
  uint8_t *buf = malloc (PAGES_PER_IO * KEPT_STATE_PAGE);
  unsigned n;
  int r = 0;

  if (at == NULL || buf == NULL) {
    r = kept_fail (ko, false, "malloc: %m");
    goto out;
  }
  do {
    n = take (opaque, &next, at, buf, PAGES_PER_IO);
    if (fdatasync (ko->fd) == -1 || write_pages (ko, at, buf, n) == -1) {
      r = kept_fail (ko, false, "flush: %m");
      redirty (opaque, at, n);
      break;
    }
  } while (n == PAGES_PER_IO);
 out:
  free (at);
  free (buf);
  return r;
}
