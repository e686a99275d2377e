/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The temporary files of the throw-away overlays (tempfiles.h). */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "checks.h"
#include "diskbytes.h"
#include "lockranks.h"
#include "punch.h"
#include "tempfiles.h"

/* A file grown for a new slot is grown beyond it by an eighth of its
 * slots, at least SLOTS_AHEAD: sparsely, so the length runs ahead of
 * the space taken, and a file written in order is grown once per 8
 * slots at first, then ever more rarely.
 */
#define SLOTS_AHEAD 8

#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* The largest offset of a file (off_t). */
#define MAX_OFFSET ((uint64_t) INT64_MAX)

/* A new temporary file in tmpdir, or -1 after nbdkit_error.  No
 * readahead: an overlay is read where clients ask, and blocks
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

struct temp_files *
temp_files_new (const char *tmpdir, unsigned nr, unsigned chunk_shift)
{
  struct temp_files *files = calloc (1, sizeof *files);

  if (files == NULL || (files->tmpdir = strdup (tmpdir)) == NULL ||
      (files->files = calloc (nr, sizeof *files->files)) == NULL) {
    nbdkit_error ("cow: calloc: %m");
    if (files)
      free (files->tmpdir);
    free (files);
    return NULL;
  }
  held_init (&files->slots_lock, LOCK_RANK_SLOTS);
  files->chunk_shift = chunk_shift;
  for (; files->nr < nr; ++files->nr) {
    struct temp_file *f = &files->files[files->nr];

    /* Slot numbers stay below what an offset can hold, and what an
     * overlay's map of slots does (store-temp.c).
     */
    slotalloc_init (&f->slots, MIN (MAX_OFFSET >> chunk_shift, UINT32_MAX));
    f->fd = temp_file (tmpdir);
    if (f->fd == -1) {
      temp_files_free (files);
      return NULL;
    }
  }
  return files;
}

void
temp_files_free (struct temp_files *files)
{
  unsigned i;

  if (files == NULL)
    return;
  for (i = 0; i < files->nr; ++i) {
    close (files->files[i].fd);
    slotalloc_free (&files->files[i].slots);
  }
  held_destroy (&files->slots_lock);
  free (files->files);
  free (files->tmpdir);
  free (files);
}

/* The slots taken in file i: every use holds slots_lock, which the
 * thread-safety analysis checks here, as it cannot at the field (the
 * lock is in struct temp_files, the slots in each struct temp_file).
 */
static struct slotalloc *
slots_of (struct temp_files *files, unsigned i) REQUIRES (files->slots_lock)
{
  return &files->files[i].slots;
}

/* Grows f over slot, and beyond it where the filesystem allows.
 * Returns 0, or -1 with errno set.
 */
static int
grow (struct temp_files *files, struct temp_file *f, uint64_t slot)
  REQUIRES (files->slots_lock)
{
  uint64_t need = (slot + 1) << files->chunk_shift;
  uint64_t beyond = slot / 8 > SLOTS_AHEAD ? slot / 8 : SLOTS_AHEAD;
  uint64_t ahead = (slot + 1 + beyond) << files->chunk_shift;

  if (need <= f->length)
    return 0;
  if (ahead <= MAX_OFFSET && ftruncate (f->fd, ahead) == 0) {
    f->length = ahead;
    return 0;
  }
  if (ftruncate (f->fd, need) == -1)
    return -1;
  f->length = need;
  return 0;
}

int
temp_files_take (struct temp_files *files, unsigned i, unsigned n,
                 uint64_t *first)
{
  struct temp_file *f = &files->files[i];
  int taken;

  held_lock (&files->slots_lock);
  taken = slotalloc_take_run (slots_of (files, i), n, first);
  /* Where the file cannot grow over the run, it may over a shorter one. */
  while (taken > 0 && grow (files, f, *first + taken - 1) == -1)
    slotalloc_release (slots_of (files, i), *first + --taken);
  held_unlock (&files->slots_lock);
  return taken > 0 ? taken : -1;
}

void
temp_files_give_back (struct temp_files *files, unsigned i, uint64_t slot)
{
  struct temp_file *f = &files->files[i];

  if (files->exiting)
    return;
  if (punch_hole (f->fd, slot << files->chunk_shift,
                  UINT64_C (1) << files->chunk_shift) == -1)
    nbdkit_debug ("cow: a slot of the overlay files not punched: %m");
  held_lock (&files->slots_lock);
  slotalloc_release (slots_of (files, i), slot);
  held_unlock (&files->slots_lock);
}

void
temp_files_cut (struct temp_files *files)
{
  unsigned i;

  if (files->exiting)
    return;
  held_lock (&files->slots_lock);
  for (i = 0; i < files->nr; ++i) {
    struct temp_file *f = &files->files[i];
    uint64_t end = slotalloc_end (slots_of (files, i)) << files->chunk_shift;

    if (end < f->length && ftruncate (f->fd, end) == 0)
      f->length = end;
  }
  held_unlock (&files->slots_lock);
}

void
temp_files_exiting (struct temp_files *files)
{
  files->exiting = true;
}

unsigned
temp_files_count (struct temp_files *files)
{
  return files->nr;
}

uint64_t
temp_files_bytes (struct temp_files *files)
{
  uint64_t bytes = 0;
  unsigned i;

  for (i = 0; i < files->nr; ++i)
    bytes += disk_bytes (files->files[i].fd);
  return bytes;
}
