/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of clonename.h: NAME@TAG reads NAME, @TAG the default
 * export, the split is at the last separator, a name without one (or
 * with no separator set) reads itself, and hostile bytes pass through
 * unchanged for the plugin to judge.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clonename.h"

static int failed;

static void
expect (const char *name, char separator, const char *want)
{
  char *got = clone_base_name (name, separator);

  if (got == NULL || strcmp (got, want) != 0) {
    fprintf (stderr, "test-clonename: \"%s\" with '%c' -> \"%s\", "
             "expected \"%s\"\n", name, separator ? separator : '0',
             got ? got : "(null)", want);
    failed = 1;
  }
  free (got);
}

int
main (void)
{
  expect ("disk1@vm17", '@', "disk1");
  expect ("@vm17", '@', "");
  expect ("disk1@", '@', "disk1");
  expect ("a@b@vm17", '@', "a@b");
  expect ("disk1", '@', "disk1");
  expect ("", '@', "");
  expect ("disk1@vm17", '\0', "disk1@vm17");
  expect ("disk1+vm17", '+', "disk1");
  expect ("disk1+vm17", '@', "disk1+vm17");
  expect ("../../etc/passwd@x", '@', "../../etc/passwd");
  return failed;
}
