/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of punch.h: a punched range reads as zeros and gives its
 * space back; the bytes around it and the file's length stay.
 */

#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fullio.h"
#include "iszero.h"
#include "punch.h"

#define FILE_BYTES (1024 * 1024)
#define HOLE_AT (256 * 1024)
#define HOLE_BYTES (512 * 1024)

static void
fail (const char *what)
{
  perror (what);
  exit (EXIT_FAILURE);
}

static long long
allocated (int fd)
{
  struct stat st;

  if (fstat (fd, &st) == -1)
    fail ("fstat");
  return (long long) st.st_blocks * 512;
}

int
main (void)
{
  const char *dir = getenv ("TMPDIR") ? getenv ("TMPDIR") : "/var/tmp";
  char template[4096];
  static char data[FILE_BYTES], back[FILE_BYTES];
  struct stat st;
  long long before;
  int fd;

  snprintf (template, sizeof template, "%s/test-punch-XXXXXX", dir);
  fd = mkstemp (template);
  if (fd == -1)
    fail ("mkstemp");
  unlink (template);

  memset (data, 0x5a, sizeof data);
  if (pwrite_full (fd, data, sizeof data, 0) == -1 || fsync (fd) == -1)
    fail ("writing the file");
  before = allocated (fd);

  if (punch_hole (fd, HOLE_AT, HOLE_BYTES) == -1) {
    if (errno == EOPNOTSUPP) {
      fprintf (stderr, "%s has no holes: skipped\n", dir);
      exit (77);
    }
    fail ("punch_hole");
  }

  if (fstat (fd, &st) == -1)
    fail ("fstat");
  if (st.st_size != FILE_BYTES) {
    fprintf (stderr, "length %lld after the punch, not %d\n",
             (long long) st.st_size, FILE_BYTES);
    exit (EXIT_FAILURE);
  }
  if (allocated (fd) > before - HOLE_BYTES) {
    fprintf (stderr, "%lld bytes allocated after the punch, %lld before\n",
             allocated (fd), before);
    exit (EXIT_FAILURE);
  }
  if (pread_full (fd, back, sizeof back, 0) == -1)
    fail ("pread_full");
  if (!is_zero (back + HOLE_AT, HOLE_BYTES)) {
    fprintf (stderr, "the punched range does not read as zeros\n");
    exit (EXIT_FAILURE);
  }
  if (memcmp (back, data, HOLE_AT) != 0 ||
      memcmp (back + HOLE_AT + HOLE_BYTES, data + HOLE_AT + HOLE_BYTES,
              FILE_BYTES - HOLE_AT - HOLE_BYTES) != 0) {
    fprintf (stderr, "bytes around the punched range changed\n");
    exit (EXIT_FAILURE);
  }
  close (fd);
  return EXIT_SUCCESS;
}
