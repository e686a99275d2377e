/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The stripes of the disk and their write locks (stripes.h). */

#include <config.h>

#include <errno.h>
#include <stdlib.h>

#include "checks.h"
#include "lockranks.h"
#include "stripes.h"
#include "timedlock.h"

int
stripes_init (struct stripes *s, unsigned nr, unsigned block_shift)
{
  unsigned i;

  s->locks = calloc (nr, sizeof *s->locks);
  if (s->locks == NULL)
    return -1;
  for (i = 0; i < nr; ++i)
    held_init (&s->locks[i], LOCK_RANK_STRIPES);
  s->nr = nr;
  s->chunk_shift = stripes_chunk_shift (block_shift);
  return 0;
}

void
stripes_free (struct stripes *s)
{
  unsigned i;

  for (i = 0; i < s->nr; ++i)
    held_destroy (&s->locks[i]);
  free (s->locks);
  s->locks = NULL;
  s->nr = 0;
}

static uint64_t
chunk_of (const struct stripes *s, uint64_t offset)
{
  return offset >> s->chunk_shift;
}

static unsigned
stripe_of_chunk (const struct stripes *s, uint64_t c)
{
  return c % s->nr;
}

/* The stripes that hold chunks c0 to c1, in the ascending order the
 * lock order wants (docs/design.md): the chunks start in stripe
 * `first` and take the stripes from it on, wrapping around past the
 * last one to [0, wrapped).  So the stripes are [0, wrapped) and then
 * [first, end), with wrapped == first when the chunks cover every
 * stripe, and wrapped == 0 when they do not wrap.
 */
struct stripe_runs {
  unsigned wrapped, first, end;
};

static struct stripe_runs
stripes_of (const struct stripes *s, uint64_t c0, uint64_t c1)
{
  uint64_t span = c1 - c0 + 1;
  struct stripe_runs runs = { .first = stripe_of_chunk (s, c0) };

  if (runs.first + span <= s->nr) {
    runs.end = runs.first + span;
    return runs;
  }
  runs.end = s->nr;
  runs.wrapped = span >= s->nr ? runs.first : runs.first + span - s->nr;
  return runs;
}

/* The first of the stripes of runs, and the one after i. */
static unsigned
runs_start (const struct stripe_runs *runs)
{
  return runs->wrapped > 0 ? 0 : runs->first;
}

static unsigned
runs_next (const struct stripe_runs *runs, unsigned i)
{
  return ++i == runs->wrapped ? runs->first : i;
}

static struct stripe_runs
stripes_of_range (const struct stripes *s, uint64_t offset, uint64_t count)
{
  return stripes_of (s, chunk_of (s, offset), chunk_of (s, offset + count - 1));
}

/* The stripe of [offset, offset+count) when the range lies in one
 * chunk, as most requests do, else -1.
 */
static int
one_stripe (const struct stripes *s, uint64_t offset, uint64_t count)
{
  uint64_t c0 = chunk_of (s, offset);

  if (s->nr == 1)
    return 0;
  return chunk_of (s, offset + count - 1) == c0 ? (int) stripe_of_chunk (s, c0)
                                                 : -1;
}

static uint64_t
lock_stripe (struct stripes *s, unsigned i) NO_TSA
{
  uint64_t waited = timed_lock (&s->locks[i]);

  held_add (&s->locks[i]);
  return waited;
}

static void
unlock_stripe (struct stripes *s, unsigned i) NO_TSA
{
  held_remove (&s->locks[i]);
  pthread_mutex_unlock (&s->locks[i]);
}

/* The analysis sees the stripes as one lock, not each of them. */
uint64_t
stripes_lock (struct stripes *s, uint64_t offset, uint64_t count) NO_TSA
{
  int one = one_stripe (s, offset, count);
  struct stripe_runs runs;
  uint64_t waited = 0;
  unsigned i;

  if (one >= 0)
    return lock_stripe (s, one);
  runs = stripes_of_range (s, offset, count);
  for (i = runs_start (&runs); i < runs.end; i = runs_next (&runs, i))
    waited += lock_stripe (s, i);
  return waited;
}

void
stripes_unlock (struct stripes *s, uint64_t offset, uint64_t count) NO_TSA
{
  int one = one_stripe (s, offset, count);
  struct stripe_runs runs;
  unsigned i;

  if (one >= 0) {
    unlock_stripe (s, one);
    return;
  }
  runs = stripes_of_range (s, offset, count);
  for (i = runs_start (&runs); i < runs.end; i = runs_next (&runs, i))
    unlock_stripe (s, i);
}

bool
stripes_held (const struct stripes *s, uint64_t offset, uint64_t count)
{
#ifdef COW_CHECKS
  struct stripe_runs runs = stripes_of_range (s, offset, count);
  unsigned i;

  for (i = runs_start (&runs); i < runs.end; i = runs_next (&runs, i))
    if (!held_by_me (&s->locks[i]))
      return false;
#endif
  return true;
}
