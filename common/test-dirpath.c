/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of dirpath.c: the directory of bare, relative, absolute
 * and top-level names, syncing a directory (by its name and by a name
 * in it) that exists and one that does not, following chains of
 * relative, absolute, dangling and looping symbolic links, and the
 * name of a file from a directory it lies in, below it or not.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

static void
expect_below (const char *dir, const char *path, const char *want)
{
  char *got;

  errno = 0;
  got = path_below (dir, path);
  if (want) {
    expect ("path_below", path, got, want);
    return;
  }
  if (got != NULL || errno != EXDEV) {
    fprintf (stderr, "test-dirpath: path_below (\"%s\", \"%s\") = \"%s\", "
             "errno %d, expected none, EXDEV\n", dir, path,
             got ? got : "(null)", errno);
    failed = 1;
  }
  free (got);
}

/* In a new directory: a file, one in a subdirectory, and a link to the
 * directory, seen from it, from the subdirectory and through the link.
 */
static void
test_path_below (void)
{
  char dir[] = "/tmp/test-dirpath.XXXXXX", path[256], sub[256], alias[256];

  if (mkdtemp (dir) == NULL) {
    perror ("mkdtemp");
    exit (EXIT_FAILURE);
  }
  snprintf (sub, sizeof sub, "%s/sub", dir);
  snprintf (alias, sizeof alias, "%s-alias", dir);
  if (mkdir (sub, 0700) == -1 || symlink (dir, alias) == -1) {
    perror (sub);
    exit (EXIT_FAILURE);
  }
  snprintf (path, sizeof path, "%s/sub/b2.qcow2", dir);
  close (creat (path, 0600));
  expect_below (dir, path, "sub/b2.qcow2");
  expect_below (sub, path, "b2.qcow2");
  expect_below (alias, path, "sub/b2.qcow2");
  snprintf (path, sizeof path, "%s-alias/sub/b2.qcow2", dir);
  expect_below (dir, path, "sub/b2.qcow2");
  expect_below (sub, dir, NULL);
  expect_below (dir, dir, NULL);
  expect_below (dir, "/etc/passwd", NULL);
  expect_below ("/", "/etc/passwd", "etc/passwd");
  errno = 0;
  if (path_below (dir, "/nonexistent-of-test-dirpath") != NULL ||
      errno != ENOENT) {
    fprintf (stderr, "test-dirpath: path_below of a missing file: errno "
             "%d, expected ENOENT\n", errno);
    failed = 1;
  }
  snprintf (path, sizeof path, "%s/sub/b2.qcow2", dir);
  unlink (path);
  rmdir (sub);
  unlink (alias);
  rmdir (dir);
}

int
main (void)
{
  test_through_links ();
  test_path_below ();
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
