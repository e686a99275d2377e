/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The temporary files of the throw-away overlays (tempfiles.h). */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "diskbytes.h"
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

/* One set of files, and where the regions given out in it end. */
struct temp_set {
  struct temp_set *next;        /* the set made before */
  unsigned nr;
  uint64_t end;
  int fds[];                    /* nr of them */
};

static void
set_free (struct temp_set *set)
{
  unsigned i;

  for (i = 0; i < set->nr; ++i)
    close (set->fds[i]);
  free (set);
}

/* A set of nr new files, or NULL after nbdkit_error. */
static struct temp_set *
set_new (const char *tmpdir, unsigned nr)
{
  struct temp_set *set = calloc (1, sizeof *set + nr * sizeof set->fds[0]);

  if (set == NULL) {
    nbdkit_error ("cow: calloc: %m");
    return NULL;
  }
  for (; set->nr < nr; ++set->nr) {
    set->fds[set->nr] = temp_file (tmpdir);
    if (set->fds[set->nr] == -1) {
      set_free (set);
      return NULL;
    }
  }
  return set;
}

struct temp_files *
temp_files_new (const char *tmpdir, unsigned nr)
{
  struct temp_files *files = calloc (1, sizeof *files);

  if (files == NULL || (files->tmpdir = strdup (tmpdir)) == NULL) {
    nbdkit_error ("cow: calloc: %m");
    free (files);
    return NULL;
  }
  files->nr = nr;
  pthread_mutex_init (&files->regions_lock, NULL);
  files->sets = set_new (tmpdir, nr);
  if (files->sets == NULL) {
    temp_files_free (files);
    return NULL;
  }
  files->nr_sets = 1;
  return files;
}

void
temp_files_free (struct temp_files *files)
{
  if (files == NULL)
    return;
  while (files->sets) {
    struct temp_set *set = files->sets;
    files->sets = set->next;
    set_free (set);
  }
  pthread_mutex_destroy (&files->regions_lock);
  free (files->tmpdir);
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

/* Gives out the next region of size bytes in set, the files grown over
 * it.  If the filesystem cannot grow them that far, a set that holds
 * regions already refuses (returns false); an empty one takes the
 * region anyway, its files left short.
 */
static bool
place (struct temp_set *set, uint64_t size, uint64_t *start)
{
  uint64_t end;
  unsigned i;

  if (size > MAX_OFFSET - set->end)
    return false;
  end = region_end (set->end + size);
  for (i = 0; i < set->nr; ++i)
    if (ftruncate (set->fds[i], end) == -1) {
      nbdkit_debug ("cow: overlay files not sized to %" PRIu64 " bytes: %m",
                    end);
      if (set->end > 0)
        return false;
    }
  *start = set->end;
  set->end = end;
  return true;
}

int
temp_files_region (struct temp_files *files, uint64_t size,
                   const int **fds, uint64_t *start)
{
  struct temp_set *set;
  int r = 0;

  pthread_mutex_lock (&files->regions_lock);
  if (!place (files->sets, size, start)) {
    set = set_new (files->tmpdir, files->nr);
    if (set == NULL)
      r = -1;
    else {
      set->next = files->sets;
      files->sets = set;
      files->nr_sets++;
      place (set, size, start);
    }
  }
  if (r == 0)
    *fds = files->sets->fds;
  pthread_mutex_unlock (&files->regions_lock);
  return r;
}

unsigned
temp_files_count (struct temp_files *files)
{
  unsigned n;

  pthread_mutex_lock (&files->regions_lock);
  n = files->nr * files->nr_sets;
  pthread_mutex_unlock (&files->regions_lock);
  return n;
}

uint64_t
temp_files_bytes (struct temp_files *files)
{
  struct temp_set *set;
  uint64_t bytes = 0;
  unsigned i;

  pthread_mutex_lock (&files->regions_lock);
  for (set = files->sets; set; set = set->next)
    for (i = 0; i < set->nr; ++i)
      bytes += disk_bytes (set->fds[i]);
  pthread_mutex_unlock (&files->regions_lock);
  return bytes;
}
