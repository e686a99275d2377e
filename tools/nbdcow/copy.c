/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The engine of nbdcow commit and export: workers take pieces of the
 * overlay's runs of blocks from a shared cursor, in order, and each
 * writes its pieces on its own connection to the target.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checks.h"
#include "copy.h"
#include "fullio.h"
#include "progress.h"

/* A piece of work is at most this many bytes (or one block if larger). */
#define PIECE_BYTES (4 * 1024 * 1024)

/* How often the progress is drawn, in ms. */
#define PROGRESS_MS 100

struct copy {
  struct overlay_file *ov;
  struct target *t;
  struct progress progress;
  uint64_t piece_blocks;
  bool consecutive;             /* copy_overlay_consecutive */

  /* Under lock: */
  mutex_t lock;
  pthread_cond_t finished_cond;
  uint64_t next_block FIELD_GUARDED_BY (lock);  /* the cursor */
  /* consecutive: where the next data block goes */
  uint64_t next_data FIELD_GUARDED_BY (lock);
  /* workers that have returned */
  unsigned finished FIELD_GUARDED_BY (lock);
  /* a worker failed: the others stop */
  bool failed FIELD_GUARDED_BY (lock);
};

struct worker {
  struct copy *c;
  unsigned conn;
  pthread_t thread;
};

/* The end of a piece of blocks [b, end) in state: a block with units
 * in place 1 is a piece of its own.
 */
static uint64_t
places_cut (const struct overlay_file *ov, uint64_t b, uint64_t end,
            unsigned state)
{
  return state == KEPT_ZERO ? end : kept_places_cut (&ov->kept, b, end);
}

/* Takes the next piece of blocks in the overlay or zero: sets *offset,
 * *length (clipped to the base), *state and *dest, where in the target
 * the piece goes.  Returns false at the end or once a worker has
 * failed.
 */
static bool
take_piece (struct copy *c, uint64_t *offset, uint64_t *length,
            unsigned *state, uint64_t *dest)
{
  const struct kept_layout *l = &c->ov->kept.header.layout;
  uint64_t blocks = kept_blocks (&c->ov->kept);
  bool found = false;

  held_lock (&c->lock);
  while (!c->failed && c->next_block < blocks) {
    uint64_t b = c->next_block;
    uint64_t end = statemap_run (&c->ov->states, b, blocks, state);

    if (*state == KEPT_NOT_ALLOCATED) {
      c->next_block = end;
      continue;
    }
    if (*state == KEPT_PARTIAL || end - b > c->piece_blocks)
      end = b + (*state == KEPT_PARTIAL ? 1 : c->piece_blocks);
    end = places_cut (c->ov, b, end, *state);
    *offset = blockgeom_start (&l->geom, b);
    *length = blockgeom_end (&l->geom, end - 1) - *offset;
    *dest = *offset;
    if (c->consecutive) {
      *dest = c->next_data;
      if (*state != KEPT_ZERO)
        c->next_data += blockgeom_start (&l->geom, end - b);
    }
    c->next_block = end;
    found = true;
    break;
  }
  held_unlock (&c->lock);
  return found;
}

/* Copies length bytes of allocated blocks, lying one after another at
 * at in the overlay file, to dest in the target.
 */
static int
copy_data (struct copy *c, unsigned conn, char *buf, uint64_t at,
           uint64_t length, uint64_t dest)
{
  struct kept_overlay *ko = &c->ov->kept;
  int r;

  /* A file target: the kernel copies, with no pass through buf. */
  r = target_copy_from (c->t, ko->fd, at, length, dest);
  if (r <= 0)
    return r;
  if (pread_full (ko->fd, buf, length, at) == -1) {
    nbdcow_error ("%s: read of %" PRIu64 " bytes at %" PRIu64 ": %m",
                  ko->path, length, at);
    return -1;
  }
  return target_write (c->t, conn, buf, length, dest);
}

/* Copies block b, held in part or with units in place 1, to dest in
 * the target: the runs of units it holds, each from its slot to its
 * place in the block.
 */
static int
copy_unit_runs (struct copy *c, unsigned conn, char *buf, uint64_t b,
                uint64_t dest)
{
  struct kept_overlay *ko = &c->ov->kept;
  const struct blockgeom *g = &ko->header.layout.geom;
  uint64_t start = blockgeom_start (g, b), stop = blockgeom_end (g, b);
  uint64_t at, next, data[2];
  unsigned place;
  bool held;

  if (kept_data_run (ko, b, 1, 0, &data[0]) == 0 ||
      (overlay_file_has_places (c->ov, b) &&
       kept_data_run (ko, b, 1, 1, &data[1]) == 0)) {
    nbdcow_error ("%s: block %" PRIu64 " is in the overlay but has no "
                  "slot", ko->path, b);
    return -1;
  }
  for (at = start; at < stop; at = next) {
    next = overlay_file_part_run (c->ov, b, at, &held, &place);
    if (held && copy_data (c, conn, buf, data[place] + (at - start),
                           next - at, dest + (at - start)) == -1)
      return -1;
  }
  return 0;
}

/* Copies the piece at offset in the overlay (block-aligned) to dest in
 * the target, a run of the file at a time.
 */
static int
copy_piece (struct copy *c, unsigned conn, char *buf, uint64_t offset,
            uint64_t length, unsigned state, uint64_t dest)
{
  struct kept_overlay *ko = &c->ov->kept;
  const struct blockgeom *g = &ko->header.layout.geom;

  if (state == KEPT_ZERO)
    /* Consecutive, the target's own map says the blocks read zeros. */
    return c->consecutive ? 0 : target_zero (c->t, conn, length, dest);
  if (state == KEPT_PARTIAL ||
      overlay_file_has_places (c->ov, blockgeom_block (g, offset)))
    return copy_unit_runs (c, conn, buf, blockgeom_block (g, offset), dest);
  while (length > 0) {
    uint64_t b = blockgeom_block (g, offset);
    uint64_t at, n = kept_data_run (ko, b,
                                    blockgeom_block (g, offset + length - 1)
                                    - b + 1, 0, &at);
    uint64_t bytes = blockgeom_start (g, n) < length ? blockgeom_start (g, n)
                                                      : length;

    if (n == 0) {
      nbdcow_error ("%s: block %" PRIu64 " is in the overlay but has no "
                    "slot", ko->path, b);
      return -1;
    }
    if (copy_data (c, conn, buf, at, bytes, dest) == -1)
      return -1;
    offset += bytes;
    dest += bytes;
    length -= bytes;
  }
  return 0;
}

static void *
worker_run (void *arg)
{
  struct worker *w = arg;
  struct copy *c = w->c;
  const struct blockgeom *g = &c->ov->kept.header.layout.geom;
  uint64_t bytes = blockgeom_start (g, c->piece_blocks);
  uint64_t offset, length, dest;
  unsigned state;
  char *buf = malloc (bytes);
  bool ok = buf != NULL;

  if (buf == NULL)
    nbdcow_error ("%s: malloc: %m", c->ov->kept.path);
  while (ok && take_piece (c, &offset, &length, &state, &dest)) {
    ok = copy_piece (c, w->conn, buf, offset, length, state, dest) == 0;
    if (ok && state == KEPT_PARTIAL)
      length = overlay_file_block_bytes (c->ov, blockgeom_block (g, offset));
    if (ok)
      progress_add (&c->progress, length);
  }
  free (buf);
  held_lock (&c->lock);
  if (!ok)
    c->failed = true;
  c->finished++;
  pthread_cond_signal (&c->finished_cond);
  held_unlock (&c->lock);
  return NULL;
}

/* Draws the progress until every started worker has finished. */
static void
wait_for_workers (struct copy *c, unsigned started)
{
  struct timespec until;

  held_lock (&c->lock);
  while (c->finished < started) {
    clock_gettime (CLOCK_REALTIME, &until);
    until.tv_nsec += PROGRESS_MS * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
      until.tv_sec++;
      until.tv_nsec -= 1000000000L;
    }
    pthread_cond_timedwait (&c->finished_cond, &c->lock, &until);
    held_unlock (&c->lock);
    progress_show (&c->progress);
    held_lock (&c->lock);
  }
  held_unlock (&c->lock);
}

/* copy_overlay, or copy_overlay_consecutive from data_offset. */
static int
copy_pieces (struct overlay_file *ov, struct target *t, bool consecutive,
             uint64_t data_offset, bool progress, const char *what,
             struct copy_totals *totals)
{
  unsigned n = target_connections (t), started, i;
  uint64_t block_size = blockgeom_block_size (&ov->kept.header.layout.geom);
  struct copy c = { .ov = ov, .t = t, .consecutive = consecutive,
                    .next_data = data_offset };
  struct worker *workers = calloc (n, sizeof *workers);
  struct overlay_counts counts;
  int err = 0;

  if (workers == NULL) {
    nbdcow_error ("%s: calloc: %m", ov->kept.path);
    return -1;
  }
  overlay_file_count (ov, &counts);
  *totals = (struct copy_totals) { .connections = n,
                                   .data_bytes = counts.bytes[KEPT_ALLOCATED],
                                   .zero_bytes = counts.bytes[KEPT_ZERO] };
  progress_init (&c.progress, progress, what,
                 totals->data_bytes + totals->zero_bytes);
  c.piece_blocks = PIECE_BYTES / block_size ? PIECE_BYTES / block_size : 1;
  pthread_mutex_init (&c.lock, NULL);
  pthread_cond_init (&c.finished_cond, NULL);

  for (started = 0; started < n; ++started) {
    workers[started] = (struct worker) { .c = &c, .conn = started };
    err = pthread_create (&workers[started].thread, NULL, worker_run,
                          &workers[started]);
    if (err != 0)
      break;
  }
  if (err != 0) {
    errno = err;
    nbdcow_error ("%s: pthread_create: %m", ov->kept.path);
    held_lock (&c.lock);
    c.failed = true;
    held_unlock (&c.lock);
  }
  wait_for_workers (&c, started);
  for (i = 0; i < started; ++i)
    pthread_join (workers[i].thread, NULL);
  progress_end (&c.progress);
  pthread_cond_destroy (&c.finished_cond);
  pthread_mutex_destroy (&c.lock);
  free (workers);
  if (c.failed || started == 0)
    return -1;
  return target_flush (t);
}

int
copy_overlay (struct overlay_file *ov, struct target *t, bool progress,
              const char *what, struct copy_totals *totals)
{
  return copy_pieces (ov, t, false, 0, progress, what, totals);
}

int
copy_overlay_consecutive (struct overlay_file *ov, struct target *t,
                          uint64_t data_offset, bool progress,
                          const char *what, struct copy_totals *totals)
{
  return copy_pieces (ov, t, true, data_offset, progress, what, totals);
}
