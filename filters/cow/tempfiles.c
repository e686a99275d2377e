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
#include "punch.h"
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

/* A run of a set's files given back, between regions still out. */
struct temp_hole {
  struct temp_hole *next;       /* the next one up */
  uint64_t start, end;
};

/* One set of files, where the regions given out in it end, and the
 * runs before that end given back (in order, none touching another or
 * the end).
 */
struct temp_set {
  struct temp_set *next;        /* the set made before */
  unsigned nr;
  uint64_t end;
  struct temp_hole *holes;
  int fds[];                    /* nr of them */
};

static void
set_free (struct temp_set *set)
{
  unsigned i;

  while (set->holes) {
    struct temp_hole *hole = set->holes;
    set->holes = hole->next;
    free (hole);
  }
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

/* The bytes a region of size bytes starting at start takes. */
static uint64_t
region_length (uint64_t start, uint64_t size)
{
  return region_end (start + size) - start;
}

/* Gives out the first run given back in set that holds size bytes.
 * The files hold it already.
 */
static bool
reuse (struct temp_set *set, uint64_t size, uint64_t *start)
{
  struct temp_hole **p, *hole;
  uint64_t length;

  for (p = &set->holes; (hole = *p) != NULL; p = &hole->next) {
    length = region_length (hole->start, size);
    if (length > hole->end - hole->start)
      continue;
    *start = hole->start;
    hole->start += length;
    if (hole->start == hole->end) {
      *p = hole->next;
      free (hole);
    }
    return true;
  }
  return false;
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
  for (set = files->sets; set; set = set->next)
    if (reuse (set, size, start))
      break;
  if (set == NULL && !place (files->sets, size, start)) {
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
    *fds = set ? set->fds : files->sets->fds;
  pthread_mutex_unlock (&files->regions_lock);
  return r;
}

/* Adds [start, end) to the runs given back in set, joined to its
 * neighbours, and to the end of the regions if it reaches it.  Returns
 * -1 if there is no memory to note it (the run is then lost to the
 * server, its disk space not).  Requires regions_lock.
 */
static int
give_back (struct temp_set *set, uint64_t start, uint64_t end)
{
  struct temp_hole **p, *hole, *next;

  for (p = &set->holes; *p && (*p)->end < start; p = &(*p)->next)
    ;
  hole = *p;
  if (hole && hole->end == start)
    hole->end = end;
  else {
    if ((hole = malloc (sizeof *hole)) == NULL)
      return -1;
    hole->start = start;
    hole->end = end;
    hole->next = *p;
    *p = hole;
  }
  next = hole->next;
  if (next && next->start == hole->end) {
    hole->end = next->end;
    hole->next = next->next;
    free (next);
  }
  if (hole->end == set->end) {
    set->end = hole->start;
    *p = hole->next;
    free (hole);
  }
  return 0;
}

void
temp_files_release (struct temp_files *files, const int *fds,
                    uint64_t start, uint64_t size)
{
  uint64_t end = start + region_length (start, size);
  struct temp_set *set;
  unsigned i;

  for (i = 0; i < files->nr; ++i)
    if (punch_hole (fds[i], start, end - start) == -1)
      nbdkit_debug ("cow: a region of the overlay files not punched: %m");
  pthread_mutex_lock (&files->regions_lock);
  for (set = files->sets; set->fds != fds; set = set->next)
    ;
  if (give_back (set, start, end) == -1)
    nbdkit_debug ("cow: a region of the overlay files not given back: %m");
  pthread_mutex_unlock (&files->regions_lock);
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
