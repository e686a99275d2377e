/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The temporary files of the throw-away overlays (tempfiles.h). */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "storeio.h"
#include "tempfiles.h"

/* Regions start at multiples of this: whole blocks of any filesystem. */
#define REGION_ALIGN (1024 * 1024)

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
temp_files_new (const char *tmpdir, unsigned nr)
{
  struct temp_files *files = calloc (1, sizeof *files);

  if (files == NULL || (files->fds = calloc (nr, sizeof *files->fds)) == NULL) {
    nbdkit_error ("cow: calloc: %m");
    free (files);
    return NULL;
  }
  pthread_mutex_init (&files->regions_lock, NULL);
  for (; files->nr < nr; ++files->nr) {
    files->fds[files->nr] = temp_file (tmpdir);
    if (files->fds[files->nr] == -1) {
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
  for (i = 0; i < files->nr; ++i)
    close (files->fds[i]);
  pthread_mutex_destroy (&files->regions_lock);
  free (files->fds);
  free (files);
}

/* The end of a region ending at end, rounded up to REGION_ALIGN but
 * never past the largest offset a file can have.
 */
static uint64_t
region_end (uint64_t end)
{
  if (end > MAX_OFFSET - (REGION_ALIGN - 1))
    return MAX_OFFSET;
  return (end + REGION_ALIGN - 1) & ~(uint64_t) (REGION_ALIGN - 1);
}

int
temp_files_region (struct temp_files *files, uint64_t size, uint64_t *start)
{
  bool fits;
  unsigned i;

  pthread_mutex_lock (&files->regions_lock);
  fits = size <= MAX_OFFSET - files->end;
  if (fits) {
    *start = files->end;
    files->end = region_end (files->end + size);
    for (i = 0; i < files->nr; ++i)
      if (ftruncate (files->fds[i], files->end) == -1)
        nbdkit_debug ("cow: overlay files not sized to %" PRIu64 " bytes: %m",
                      files->end);
  }
  pthread_mutex_unlock (&files->regions_lock);
  if (!fits)
    nbdkit_error ("cow: no room for an overlay of %" PRIu64 " bytes: the "
                  "throw-away overlays of this server would pass the largest "
                  "file offset (%" PRIu64 " bytes)", size, MAX_OFFSET);
  return fits ? 0 : -1;
}

uint64_t
temp_files_bytes (const struct temp_files *files)
{
  uint64_t bytes = 0;
  unsigned i;

  for (i = 0; i < files->nr; ++i)
    bytes += storeio_bytes (files->fds[i]);
  return bytes;
}
