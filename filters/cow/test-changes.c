/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of changes.h: a block changed since a checkpoint is
 * reported changed since it, one not changed is not; and when a mark
 * cannot be made for want of memory (calloc failing, wrapped at link
 * time), every checkpoint made up to then, the newest included,
 * reports every block, and the checkpoints made after it report
 * exactly again.
 */

#include <config.h>

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "changes.h"

#define BLOCKS (UINT64_C (1) << 24)

static int failed;
static bool calloc_fails;

void *__real_calloc (size_t n, size_t size);
void *__wrap_calloc (size_t n, size_t size);

void *
__wrap_calloc (size_t n, size_t size)
{
  return calloc_fails ? NULL : __real_calloc (n, size);
}

/* changes.c says why the marks were lost: nothing to see here. */
void
nbdkit_error (const char *fs, ...)
{
}

static uint32_t
epoch_of (struct changes *ch, const char *name)
{
  uint32_t since = 0;

  if (changes_since (ch, name, &since) == -1) {
    fprintf (stderr, "test-changes: no checkpoint %s\n", name);
    exit (EXIT_FAILURE);
  }
  return since;
}

static void
expect (struct changes *ch, const char *name, uint64_t b, bool want)
{
  bool changed;

  changes_run (ch, b, b + 1, epoch_of (ch, name), &changed);
  if (changed != want) {
    fprintf (stderr, "test-changes: block %" PRIu64 " %s since %s\n", b,
             changed ? "changed" : "unchanged", name);
    failed = 1;
  }
}

/* c2 and c3 were made with a view, c3 last: c3 alone is the view's,
 * until it is deleted.  Each checkpoint has an id of its own.
 */
static void
expect_views (struct changes *ch)
{
  struct checkpoint c2, c3;
  char name[CHECKPOINT_NAME_MAX + 1];

  if (changes_get (ch, "c2", &c2) == -1 || changes_get (ch, "c3", &c3) == -1 ||
      c2.view || !c3.view || c2.id == 0 || c2.id == c3.id) {
    fprintf (stderr, "test-changes: c2, c3 made with views, kept as %d %d, "
             "ids %" PRIx64 " %" PRIx64 "\n", c2.view, c3.view, c2.id, c3.id);
    failed = 1;
  }
  if (!changes_view_of (ch, name) || strcmp (name, "c3") != 0 ||
      changes_end_view (ch, "c2") || !changes_end_view (ch, "c3") ||
      changes_view_of (ch, name)) {
    fprintf (stderr, "test-changes: the view's checkpoint not c3 alone\n");
    failed = 1;
  }
}

int
main (void)
{
  struct changes ch;
  const uint64_t far = BLOCKS / 2;      /* a leaf of the marks of its own */

  changes_init (&ch);
  if (changes_start (&ch, BLOCKS) == -1 || changes_create (&ch, "c1", false) == -1)
    return EXIT_FAILURE;
  changes_mark (&ch, 0, 1);
  if (changes_create (&ch, "c2", true) == -1)
    return EXIT_FAILURE;
  changes_mark (&ch, 1, 1);
  expect (&ch, "c1", 0, true);
  expect (&ch, "c2", 0, false);
  expect (&ch, "c2", 1, true);
  expect (&ch, "c2", far, false);

  /* The mark of far needs a leaf, which cannot be had. */
  calloc_fails = true;
  changes_mark (&ch, far, 1);
  calloc_fails = false;
  if (!changes_lost (&ch)) {
    fprintf (stderr, "test-changes: a lost mark not noted\n");
    failed = 1;
  }
  expect (&ch, "c1", far, true);
  expect (&ch, "c2", far, true);
  expect (&ch, "c2", 0, true);          /* more than changed, never less */

  /* A checkpoint made after the loss is exact again. */
  if (changes_create (&ch, "c3", true) == -1)
    return EXIT_FAILURE;
  changes_mark (&ch, 2, 1);
  expect (&ch, "c3", 2, true);
  expect (&ch, "c3", 0, false);
  expect_views (&ch);
  changes_free (&ch);
  if (!failed)
    printf ("test-changes: ok\n");
  return failed;
}
