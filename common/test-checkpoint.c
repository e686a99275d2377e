/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of checkpoint.h: which names name a checkpoint, and new
 * ids, never 0 and each another.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"

static void
expect (const char *name, bool valid)
{
  if (checkpoint_name_valid (name) != valid) {
    fprintf (stderr, "\"%s\" taken as %s\n", name,
             valid ? "invalid" : "valid");
    exit (EXIT_FAILURE);
  }
}

static void
expect_new_ids (void)
{
  uint64_t ids[64];
  unsigned i, j;

  for (i = 0; i < 64; ++i) {
    ids[i] = checkpoint_new_id ();
    for (j = 0; j <= i; ++j)
      if (ids[i] == 0 || (j < i && ids[i] == ids[j])) {
        fprintf (stderr, "new id %u is 0 or id %u again\n", i, j);
        exit (EXIT_FAILURE);
      }
  }
}

int
main (void)
{
  char longest[CHECKPOINT_NAME_MAX + 2];

  expect ("c1", true);
  expect ("2026-11-29_full.0", true);
  expect ("", false);
  expect ("-c", false);
  expect (".c", false);
  expect ("a/b", false);
  expect ("a b", false);
  expect ("a\nb", false);
  expect ("caf\xc3\xa9", false);
  memset (longest, 'x', CHECKPOINT_NAME_MAX);
  longest[CHECKPOINT_NAME_MAX] = '\0';
  expect (longest, true);
  longest[CHECKPOINT_NAME_MAX] = 'x';
  longest[CHECKPOINT_NAME_MAX + 1] = '\0';
  expect (longest, false);
  expect_new_ids ();
  return EXIT_SUCCESS;
}
