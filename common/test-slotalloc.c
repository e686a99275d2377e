/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of slotalloc.h: the lowest free slot first, marks from a
 * load, the end of the data area, ENOSPC at the limit, slots given
 * back: taken again lowest first, the end lowered past them, and runs
 * of slots: in a row from the lowest free one, cut short by a taken
 * slot or the limit, across words of the bitmap and its growth.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "slotalloc.h"

static void
fail (const char *what, uint64_t slot)
{
  fprintf (stderr, "test-slotalloc: %s (slot %" PRIu64 ")\n", what, slot);
  exit (EXIT_FAILURE);
}

static uint64_t
take (struct slotalloc *a)
{
  uint64_t slot;

  if (slotalloc_take (a, &slot) == -1)
    fail ("take failed", 0);
  return slot;
}

/* The slots of a loaded area: every third one a hole, and 131. */
static bool
is_marked (uint64_t i)
{
  return i % 3 != 1 && i != 131;
}

/* Takes a run of up to n slots, which must start at first and be k
 * long, and checks that each of them is taken.
 */
static void
take_run (struct slotalloc *a, unsigned n, uint64_t first, int k)
{
  uint64_t s;
  int got = slotalloc_take_run (a, n, &s), i;

  if (got != k || s != first)
    fail ("a run not where or as long as it should be", s);
  for (i = 0; i < k; ++i)
    if (!slotalloc_is_taken (a, first + i))
      fail ("a slot of a run not taken", first + i);
}

int
main (void)
{
  struct slotalloc a;
  uint64_t s, i;

  /* A fresh area is filled from slot 0 up. */
  slotalloc_init (&a, 1000);
  for (i = 0; i < 200; ++i)
    if ((s = take (&a)) != i)
      fail ("not the lowest free slot", s);
  if (slotalloc_end (&a) != 200)
    fail ("end after 200 takes", slotalloc_end (&a));
  slotalloc_free (&a);

  /* A loaded area: the holes between marked slots are handed out first,
   * lowest first, then the area grows.
   */
  slotalloc_init (&a, 1000);
  for (i = 0; i < 300; ++i)
    if (is_marked (i) && slotalloc_mark (&a, i) != 0)
      fail ("mark of a free slot", i);
  if (slotalloc_mark (&a, 0) != 1)
    fail ("a second mark is not reported", 0);
  if (slotalloc_end (&a) != 300)
    fail ("end after the marks", slotalloc_end (&a));
  for (i = 0; i < 300; ++i)
    if (!is_marked (i) && (s = take (&a)) != i)
      fail ("not the lowest hole", s);
  if ((s = take (&a)) != 300 || (s = take (&a)) != 301)
    fail ("not appended after the holes", s);
  for (i = 0; i <= 301; ++i)
    if (!slotalloc_is_taken (&a, i))
      fail ("slot not taken", i);
  if (slotalloc_is_taken (&a, 302) || slotalloc_is_taken (&a, 1u << 20))
    fail ("slot taken that never was", 302);

  /* The limit. */
  while (slotalloc_end (&a) < 1000)
    take (&a);
  if (slotalloc_take (&a, &s) != -1 || errno != ENOSPC)
    fail ("no ENOSPC at the limit", 1000);
  slotalloc_free (&a);

  /* Given back: the lowest is taken first; giving back the highest
   * lowers the end past every slot free below it.
   */
  slotalloc_init (&a, 1000);
  for (i = 0; i < 300; ++i)
    take (&a);
  slotalloc_release (&a, 17);
  slotalloc_release (&a, 5);
  if (slotalloc_is_taken (&a, 5) || (s = take (&a)) != 5 ||
      (s = take (&a)) != 17 || (s = take (&a)) != 300)
    fail ("slots given back not taken lowest first", s);
  for (i = 100; i <= 300; ++i)
    slotalloc_release (&a, i);
  if (slotalloc_end (&a) != 100)
    fail ("end after giving back the top", slotalloc_end (&a));
  for (i = 0; i < 100; ++i)
    slotalloc_release (&a, i);
  if (slotalloc_end (&a) != 0 || (s = take (&a)) != 0)
    fail ("an area given back whole is not empty", slotalloc_end (&a));
  slotalloc_free (&a);
  /* Runs: at the end of the area, across a word of the bitmap and its
   * growth; cut short by a taken slot; capped at the limit.
   */
  slotalloc_init (&a, 2000);
  take_run (&a, 8, 0, 8);
  take_run (&a, 8, 8, 8);
  for (i = 16; i < 60; ++i)
    take (&a);
  take_run (&a, 8, 60, 8);
  if (slotalloc_end (&a) != 68 || (s = take (&a)) != 68)
    fail ("not appended after a run", s);
  while (slotalloc_end (&a) < 1020)
    take (&a);
  take_run (&a, 8, 1020, 8);
  if (slotalloc_end (&a) != 1028)
    fail ("end after a run that grew the bitmap", slotalloc_end (&a));
  slotalloc_release (&a, 3);
  slotalloc_release (&a, 5);
  slotalloc_release (&a, 6);
  take_run (&a, 8, 3, 1);
  take_run (&a, 8, 5, 2);
  take_run (&a, 8, 1028, 8);
  slotalloc_free (&a);
  slotalloc_init (&a, 10);
  for (i = 0; i < 7; ++i)
    take (&a);
  take_run (&a, 8, 7, 3);
  if (slotalloc_take_run (&a, 8, &s) != -1 || errno != ENOSPC)
    fail ("no ENOSPC for a run at the limit", 10);
  slotalloc_free (&a);
  return EXIT_SUCCESS;
}
