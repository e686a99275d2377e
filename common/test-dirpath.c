/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* Unit test of dirpath.c: the directory of bare, relative, absolute
 * and top-level names, and syncing a directory that exists and one that
 * does not.
 */

#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dirpath.h"

static int failed;

static void
expect_dir (const char *path, const char *want)
{
  char *got = dir_of (path);

  if (got == NULL || strcmp (got, want) != 0) {
    fprintf (stderr, "test-dirpath: dir_of (\"%s\") = \"%s\", expected "
             "\"%s\"\n", path, got ? got : "(null)", want);
    failed = 1;
  }
  free (got);
}

int
main (void)
{
  expect_dir ("ov.cow", ".");
  expect_dir ("a/ov.cow", "a");
  expect_dir ("/var/tmp/ov.cow", "/var/tmp");
  expect_dir ("/ov.cow", "/");
  if (sync_dir_of ("/tmp/any-name") == -1) {
    perror ("test-dirpath: sync_dir_of (\"/tmp/any-name\")");
    failed = 1;
  }
  errno = 0;
  if (sync_dir_of ("/nonexistent-dir-of-test-dirpath/x") != -1 ||
      errno != ENOENT) {
    fprintf (stderr, "test-dirpath: sync_dir_of of a missing directory: "
             "errno %d, expected ENOENT\n", errno);
    failed = 1;
  }
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
