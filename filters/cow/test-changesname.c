/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of changesname.h: disk+ is the view of disk since its
 * overlay began, disk+c1 since checkpoint c1, +c1 the default
 * export's, a clone's name keeps its tag, the split is at the last
 * separator, and a name without one (or with no separator set) names
 * no view; disk@v1 is view v1 of disk, disk@ a view of an empty name,
 * and a changes view of a view keeps the view's name.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "changesname.h"

static int failed;

/* want_export NULL: name names no view. */
static void
expect (const char *name, char separator, const char *want_export,
        const char *want_checkpoint)
{
  char *export = NULL;
  const char *checkpoint = NULL;
  int r = changes_view_name (name, separator, &export, &checkpoint);

  if (r == -1 || (r == 1) != (want_export != NULL) ||
      (r == 1 && (strcmp (export, want_export) != 0 ||
                  strcmp (checkpoint, want_checkpoint) != 0))) {
    fprintf (stderr, "test-changesname: \"%s\" with '%c' -> %d \"%s\" "
             "\"%s\", expected \"%s\" \"%s\"\n", name,
             separator ? separator : '0', r, export ? export : "(null)",
             checkpoint ? checkpoint : "(null)",
             want_export ? want_export : "(no view)",
             want_checkpoint ? want_checkpoint : "");
    failed = 1;
  }
  free (export);
}

/* As expect, for instant_view_name. */
static void
expect_view (const char *name, char separator, const char *want_export,
             const char *want_view)
{
  char *export = NULL;
  const char *view = NULL;
  int r = instant_view_name (name, separator, &export, &view);

  if (r == -1 || (r == 1) != (want_export != NULL) ||
      (r == 1 && (strcmp (export, want_export) != 0 ||
                  strcmp (view, want_view) != 0))) {
    fprintf (stderr, "test-changesname: view \"%s\" with '%c' -> %d\n",
             name, separator ? separator : '0', r);
    failed = 1;
  }
  free (export);
}

int
main (void)
{
  expect ("disk+", '+', "disk", "");
  expect ("disk+c1", '+', "disk", "c1");
  expect ("+c1", '+', "", "c1");
  expect ("+", '+', "", "");
  expect ("golden@vm1+c2", '+', "golden@vm1", "c2");
  expect ("a+b+c3", '+', "a+b", "c3");
  expect ("disk", '+', NULL, NULL);
  expect ("", '+', NULL, NULL);
  expect ("disk+c1", '\0', NULL, NULL);
  expect ("disk+c1", '#', NULL, NULL);

  expect_view ("disk@v1", '@', "disk", "v1");
  expect_view ("a@b@v2", '@', "a@b", "v2");
  expect_view ("golden%vm1@v3", '@', "golden%vm1", "v3");
  expect_view ("@v1", '@', "", "v1");
  expect_view ("disk@", '@', "disk", "");
  expect_view ("disk", '@', NULL, NULL);
  expect_view ("disk@v1", '\0', NULL, NULL);
  expect ("disk@v1+c1", '+', "disk@v1", "c1");
  if (!view_separator_forgotten ("disk@v1", '\0', '\0') ||
      view_separator_forgotten ("disk@v1", '@', '\0') ||
      view_separator_forgotten ("disk@vm1", '\0', '@') ||
      view_separator_forgotten ("disk", '\0', '\0')) {
    fprintf (stderr, "test-changesname: a forgotten view separator "
             "misjudged\n");
    failed = 1;
  }

  if (!changes_separator_forgotten ("+", '\0', '\0') ||
      !changes_separator_forgotten ("disk+c1", '\0', '@') ||
      changes_separator_forgotten ("disk", '\0', '\0') ||
      changes_separator_forgotten ("+", '+', '\0') ||
      changes_separator_forgotten ("disk+c1", '#', '\0') ||
      changes_separator_forgotten ("disk+vm1", '\0', '+')) {
    fprintf (stderr, "test-changesname: a forgotten separator misjudged\n");
    failed = 1;
  }
  return failed;
}
