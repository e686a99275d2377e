/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The lock on ranges of blocks (rangelock.h). */

#include <config.h>

#include <pthread.h>
#include <stdbool.h>

#include "checks.h"
#include "monotonic.h"
#include "rangelock.h"

/* What checks.h knows a thread holding a range of locks by: not the
 * address of locks, which is its list's mutex's.
 */
static const void *
held_key (const struct rangelock *locks)
{
  return &locks->head;
}

void
rangelock_init (struct rangelock *locks, unsigned rank)
{
  pthread_mutex_init (&locks->lock, NULL);
  held_rank (held_key (locks), rank);
  locks->head = locks->tail = NULL;
}

void
rangelock_destroy (struct rangelock *locks)
{
  held_unrank (held_key (locks));
  pthread_mutex_destroy (&locks->lock);
}

static bool
overlap (const struct rangelock_range *a, const struct rangelock_range *b)
{
  return a->first < b->end && b->first < a->end;
}

/* Expects locks->lock held. */
static void
append (struct rangelock *locks, struct rangelock_range *range)
{
  range->next = NULL;
  range->prev = locks->tail;
  if (locks->tail)
    locks->tail->next = range;
  else
    locks->head = range;
  locks->tail = range;
}

/* Expects locks->lock held. */
static void
unlink_range (struct rangelock *locks, struct rangelock_range *range)
{
  if (range->prev)
    range->prev->next = range->next;
  else
    locks->head = range->next;
  if (range->next)
    range->next->prev = range->prev;
  else
    locks->tail = range->prev;
}

/* The analysis sees the whole set as one lock (rangelock.h), taken
 * here and let go of in rangelock_unlock, while the list's own mutex
 * is taken and let go of within each.
 */
uint64_t
rangelock_lock (struct rangelock *locks, struct rangelock_range *range,
                uint64_t first, uint64_t n) NO_TSA
{
  const struct rangelock_range *r;
  uint64_t waited = 0;

  range->first = first;
  range->end = first + n;
  range->blockers = 0;

  held_lock (&locks->lock);
  for (r = locks->head; r; r = r->next)
    if (overlap (r, range))
      range->blockers++;
  append (locks, range);

  /* The condition variable exists only while someone may signal it:
   * rangelock_unlock signals only ranges whose count it takes to zero.
   */
  if (range->blockers > 0) {
    uint64_t start = monotonic_ns ();
    pthread_cond_init (&range->unblocked, NULL);
    while (range->blockers > 0)
      pthread_cond_wait (&range->unblocked, &locks->lock);
    pthread_cond_destroy (&range->unblocked);
    waited = monotonic_ns () - start;
    if (waited == 0)
      waited = 1;               /* it did wait, however short */
  }
#ifdef COW_CHECKS
  range->owner = pthread_self ();
#endif
  held_unlock (&locks->lock);
  held_add (held_key (locks));
  return waited;
}

void
rangelock_unlock (struct rangelock *locks, struct rangelock_range *range)
  NO_TSA
{
  struct rangelock_range *r;

  held_remove (held_key (locks));
  held_lock (&locks->lock);
  for (r = range->next; r; r = r->next)
    if (overlap (r, range) && --r->blockers == 0)
      pthread_cond_signal (&r->unblocked);
  unlink_range (locks, range);
  held_unlock (&locks->lock);
}

bool
rangelock_held (struct rangelock *locks, uint64_t first, uint64_t n)
{
  bool held = true;
#ifdef COW_CHECKS
  const struct rangelock_range *r;

  held = false;
  held_lock (&locks->lock);
  for (r = locks->head; r && !held; r = r->next)
    held = r->blockers == 0 && pthread_equal (r->owner, pthread_self ()) &&
           r->first <= first && first + n <= r->end;
  held_unlock (&locks->lock);
#endif
  return held;
}
