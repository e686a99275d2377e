/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of fullio.h: round trips, reads past the end, errors. */

#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fullio.h"

static void
fail (const char *what)
{
  perror (what);
  exit (EXIT_FAILURE);
}

int
main (void)
{
  char template[] = "/tmp/test-fullio-XXXXXX";
  char out[8192], in[8192];
  int fd;
  size_t i;

  fd = mkstemp (template);
  if (fd == -1)
    fail ("mkstemp");
  unlink (template);

  for (i = 0; i < sizeof out; ++i)
    out[i] = (char) (i * 7 + 1);
  if (pwrite_full (fd, out, sizeof out, 4096) == -1)
    fail ("pwrite_full");
  if (pread_full (fd, in, sizeof in, 4096) == -1)
    fail ("pread_full");
  if (memcmp (in, out, sizeof in) != 0) {
    fprintf (stderr, "round trip differs\n");
    exit (EXIT_FAILURE);
  }

  /* A read straddling the end of the file: the tail reads as zero. */
  memset (in, 'x', sizeof in);
  if (pread_full (fd, in, sizeof in, 8192) == -1)
    fail ("pread_full at end");
  if (memcmp (in, out + 4096, 4096) != 0) {
    fprintf (stderr, "head of straddling read differs\n");
    exit (EXIT_FAILURE);
  }
  for (i = 4096; i < sizeof in; ++i)
    if (in[i] != 0) {
      fprintf (stderr, "byte %zu past the end is not zero\n", i);
      exit (EXIT_FAILURE);
    }

  /* Errors come back as -1 with errno. */
  close (fd);
  errno = 0;
  if (pread_full (fd, in, 1, 0) != -1 || errno != EBADF) {
    fprintf (stderr, "pread_full on a closed fd did not fail with EBADF\n");
    exit (EXIT_FAILURE);
  }
  errno = 0;
  if (pwrite_full (fd, out, 1, 0) != -1 || errno != EBADF) {
    fprintf (stderr, "pwrite_full on a closed fd did not fail with EBADF\n");
    exit (EXIT_FAILURE);
  }
  return EXIT_SUCCESS;
}
