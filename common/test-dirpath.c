/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of dirpath.c: the directory of bare, relative, absolute
 * and top-level names, syncing a directory (by its name and by a name
 * in it) that exists and one that does not, and following chains of
 * relative, absolute, dangling and looping symbolic links.
 */

#include <config.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dirpath.h"

static int failed;

/* Checks what function returned for path: got, malloc'd. */
static void
expect (const char *function, const char *path, char *got, const char *want)
{
  if (got == NULL || strcmp (got, want) != 0) {
    fprintf (stderr, "test-dirpath: %s (\"%s\") = \"%s\", expected \"%s\"\n",
             function, path, got ? got : "(null)", want);
    failed = 1;
  }
  free (got);
}

static void
expect_dir (const char *path, const char *want)
{
  expect ("dir_of", path, dir_of (path), want);
}

static void
expect_through (const char *path, const char *want)
{
  expect ("through_links", path, through_links (path), want);
}

static void
make_link (const char *target, const char *dir, const char *name)
{
  char path[256];

  snprintf (path, sizeof path, "%s/%s", dir, name);
  if (symlink (target, path) == -1) {
    perror (path);
    exit (EXIT_FAILURE);
  }
}

/* In a new directory: a chain to a file, an absolute link, a dangling
 * link into a subdirectory, and a loop.
 */
static void
test_through_links (void)
{
  char dir[] = "/tmp/test-dirpath.XXXXXX", path[256], want[256];

  if (mkdtemp (dir) == NULL) {
    perror ("mkdtemp");
    exit (EXIT_FAILURE);
  }
  make_link ("file", dir, "one");
  make_link ("one", dir, "two");
  snprintf (want, sizeof want, "%s/sub/new", dir);
  make_link (want, dir, "absolute");
  make_link ("sub/new", dir, "dangling");
  make_link ("loop-b", dir, "loop-a");
  make_link ("loop-a", dir, "loop-b");

  snprintf (path, sizeof path, "%s/two", dir);
  snprintf (want, sizeof want, "%s/file", dir);
  expect_through (path, want);
  snprintf (path, sizeof path, "%s/dangling", dir);
  snprintf (want, sizeof want, "%s/sub/new", dir);
  expect_through (path, want);
  snprintf (path, sizeof path, "%s/absolute", dir);
  expect_through (path, want);
  snprintf (path, sizeof path, "%s/not-a-link", dir);
  expect_through (path, path);
  snprintf (path, sizeof path, "%s/loop-a", dir);
  errno = 0;
  if (through_links (path) != NULL || errno != ELOOP) {
    fprintf (stderr, "test-dirpath: through_links of a loop: errno %d, "
             "expected ELOOP\n", errno);
    failed = 1;
  }
  for (const char *const *n = (const char *const[]) { "one", "two",
         "absolute", "dangling", "loop-a", "loop-b", NULL }; *n; ++n) {
    snprintf (path, sizeof path, "%s/%s", dir, *n);
    unlink (path);
  }
  rmdir (dir);
}

int
main (void)
{
  test_through_links ();
  expect_dir ("ov.cow", ".");
  expect_dir ("a/ov.cow", "a");
  expect_dir ("/var/tmp/ov.cow", "/var/tmp");
  expect_dir ("/ov.cow", "/");
  if (sync_dir_of ("/tmp/any-name") == -1) {
    perror ("test-dirpath: sync_dir_of (\"/tmp/any-name\")");
    failed = 1;
  }
  if (sync_dir ("/tmp") == -1) {
    perror ("test-dirpath: sync_dir (\"/tmp\")");
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
