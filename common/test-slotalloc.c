/* Unit test of slotalloc.h: the lowest free slot first, marks from a
 * load, the end of the data area, ENOSPC at the limit, and slots given
 * back: taken again lowest first, the end lowered past them.
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
  return EXIT_SUCCESS;
}
