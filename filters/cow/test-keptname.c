/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of keptname.h: the default export's file is PATH itself;
 * hostile names stay in the directory of PATH, every byte outside
 * [A-Za-z0-9_-] escaped; the longest name that fits is kept, one byte
 * more is hashed; two names differing only in a byte that is escaped
 * get two files; the hash, which names files on disk, is FNV-1a.  A
 * PATH whose file name leaves no room for the hashed names, or whose
 * directory none for a whole file name, is said not to fit.
 */

#include <config.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keptname.h"

#define PATH "/srv/cow/disk.cow"

static int failed;

static void
expect (const char *name, const char *want)
{
  char *got = kept_file_name (PATH, name);

  if (got == NULL || strcmp (got, want) != 0) {
    fprintf (stderr, "test-keptname: \"%s\" -> %s, expected %s\n", name,
             got ? got : "(null)", want);
    failed = 1;
  }
  free (got);
}

int
main (void)
{
  char name[NAME_MAX + 2], want[PATH_MAX];
  size_t room = NAME_MAX - strlen ("disk.cow.");

  expect ("", PATH);
  expect ("vm17", PATH ".vm17");
  expect ("a_b-C9", PATH ".a_b-C9");
  expect ("../../etc/passwd", PATH ".%2E%2E%2F%2E%2E%2Fetc%2Fpasswd");
  expect ("/", PATH ".%2F");
  expect (".", PATH ".%2E");
  expect ("%2F", PATH ".%252F");
  expect ("a b\n", PATH ".a%20b%0A");
  expect ("\xc3\xa9", PATH ".%C3%A9");

  /* The longest plain name that fits, and one byte more. */
  memset (name, 'x', room);
  name[room] = '\0';
  snprintf (want, sizeof want, PATH ".%s", name);
  expect (name, want);
  name[room] = 'x';
  name[room + 1] = '\0';
  expect (name, PATH ".#4406fbf748a5ac1f");

  /* The longest file name of PATH that fits, and one byte more. */
  name[0] = '/';
  memset (name + 1, 'k', NAME_MAX - KEPT_NAME_SUFFIX);
  name[1 + NAME_MAX - KEPT_NAME_SUFFIX] = '\0';
  if (!kept_file_names_fit (name)) {
    fprintf (stderr, "test-keptname: a file name of %d bytes does not fit\n",
             NAME_MAX - KEPT_NAME_SUFFIX);
    failed = 1;
  }
  strcat (name, "k");
  if (kept_file_names_fit (name)) {
    fprintf (stderr, "test-keptname: a file name of %d bytes fits\n",
             NAME_MAX - KEPT_NAME_SUFFIX + 1);
    failed = 1;
  }
  memset (want, 'd', PATH_MAX - NAME_MAX);
  want[0] = '/';
  strcpy (want + PATH_MAX - NAME_MAX, "/k");
  if (kept_file_names_fit (want)) {
    fprintf (stderr, "test-keptname: a directory of %d bytes fits\n",
             PATH_MAX - NAME_MAX);
    failed = 1;
  }
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
