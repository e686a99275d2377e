/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of rangelock.h.
 *
 *  - Exclusion: threads lock random, overlapping ranges (short, long,
 *    and many adjacent) and check that nobody else is inside any block
 *    of theirs.  A deadlock shows as the test hanging (make check's
 *    timeout); an exclusion failure as a counter that is not 1.
 *  - Only true overlaps wait: while one range is held, a thread locking
 *    the adjacent range, and one a multiple of 1024 blocks away (where
 *    the old slot table collided), get their locks at once.
 *  - Overlaps wait: a thread locking into a held range gets its lock
 *    only after the holder unlocks.
 *  - Arrival order among overlapping ranges: a range waiting behind a
 *    holder is granted before a later overlapping range.
 *  - The wait reported: 0 for a range granted at once, at least the
 *    time the holder kept it for one that waited.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "rangelock.h"

#define THREADS 8
#define ROUNDS 5000
#define BLOCKS 4096

static struct rangelock locks;
static atomic_int inside[BLOCKS];
static atomic_int failed;

static void
fail (const char *what)
{
  fprintf (stderr, "test-rangelock: %s\n", what);
  exit (EXIT_FAILURE);
}

static void
start (pthread_t *t, void *(*fn) (void *), void *arg)
{
  if (pthread_create (t, NULL, fn, arg) != 0)
    fail ("pthread_create failed");
}

static void *
random_ranges (void *arg)
{
  unsigned seed = (unsigned) (uintptr_t) arg;
  unsigned r;

  for (r = 0; r < ROUNDS; ++r) {
    struct rangelock_range range;
    uint64_t first = rand_r (&seed) % BLOCKS;
    uint64_t n, b;

    switch (rand_r (&seed) % 4) {
    case 0: n = 1 + rand_r (&seed) % 512; break;
    case 1: first -= first % 16; n = 16; break;   /* adjacent ranges */
    default: n = 1 + rand_r (&seed) % 4; break;
    }
    if (first + n > BLOCKS)
      n = BLOCKS - first;

    rangelock_lock (&locks, &range, first, n);
    for (b = first; b < first + n; ++b)
      if (atomic_fetch_add (&inside[b], 1) != 0)
        atomic_store (&failed, 1);
    for (b = first; b < first + n; ++b)
      atomic_fetch_sub (&inside[b], 1);
    rangelock_unlock (&locks, &range);
  }
  return NULL;
}

static void
check_exclusion (void)
{
  pthread_t t[THREADS];
  uintptr_t i;

  for (i = 0; i < THREADS; ++i)
    start (&t[i], random_ranges, (void *) (i + 1));
  for (i = 0; i < THREADS; ++i)
    pthread_join (t[i], NULL);
  if (failed)
    fail ("two threads were inside the same block");
}

/* A thread that locks one range, posts `got`, waits for `go`, unlocks. */
struct locker {
  uint64_t first, n;
  uint64_t waited_ns;           /* what rangelock_lock returned */
  sem_t got, go;
  pthread_t thread;
};

static void *
locker_run (void *arg)
{
  struct locker *l = arg;
  struct rangelock_range range;

  l->waited_ns = rangelock_lock (&locks, &range, l->first, l->n);
  sem_post (&l->got);
  while (sem_wait (&l->go) == -1 && errno == EINTR)
    ;
  rangelock_unlock (&locks, &range);
  return NULL;
}

static void
locker_start (struct locker *l, uint64_t first, uint64_t n)
{
  l->first = first;
  l->n = n;
  sem_init (&l->got, 0, 0);
  sem_init (&l->go, 0, 0);
  start (&l->thread, locker_run, l);
}

/* Whether the locker got its lock within `ms` milliseconds. */
static int
locker_got (struct locker *l, long ms)
{
  struct timespec ts;
  int r;

  clock_gettime (CLOCK_REALTIME, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  while ((r = sem_timedwait (&l->got, &ts)) == -1 && errno == EINTR)
    ;
  return r == 0;
}

static void
locker_finish (struct locker *l)
{
  sem_post (&l->go);
  pthread_join (l->thread, NULL);
  sem_destroy (&l->got);
  sem_destroy (&l->go);
}

static void
check_disjoint_do_not_wait (void)
{
  struct locker held, adjacent, far;

  locker_start (&held, 0, 256);
  if (!locker_got (&held, 10000))
    fail ("first lock not granted");
  locker_start (&adjacent, 256, 256);
  locker_start (&far, 1024, 1);
  if (!locker_got (&adjacent, 10000))
    fail ("an adjacent range waited for a held one");
  if (!locker_got (&far, 10000))
    fail ("a range 1024 blocks away waited for a held one");
  locker_finish (&held);
  locker_finish (&adjacent);
  locker_finish (&far);
  if (held.waited_ns != 0 || adjacent.waited_ns != 0 || far.waited_ns != 0)
    fail ("a range granted at once reported a wait");
}

/* Waits until the list holds n ranges, locked or waiting. */
static void
wait_for_ranges (unsigned n)
{
  for (;;) {
    const struct rangelock_range *r;
    unsigned k = 0;

    pthread_mutex_lock (&locks.lock);
    for (r = locks.head; r; r = r->next)
      k++;
    pthread_mutex_unlock (&locks.lock);
    if (k >= n)
      return;
    usleep (1000);
  }
}

static void
check_overlaps_wait_in_order (void)
{
  struct locker held, waiter, later;

  locker_start (&held, 10, 10);
  if (!locker_got (&held, 10000))
    fail ("first lock not granted");
  locker_start (&waiter, 19, 5);        /* overlaps the held range */
  if (locker_got (&waiter, 200))
    fail ("an overlapping range was granted while held");
  wait_for_ranges (2);          /* the waiter is queued from here on */
  locker_start (&later, 22, 1);         /* overlaps only the waiter */
  if (locker_got (&later, 200))
    fail ("a later range overtook an earlier overlapping one");

  locker_finish (&held);
  if (!locker_got (&waiter, 10000))
    fail ("a waiter was not woken by the unlock");
  if (locker_got (&later, 200))
    fail ("two overlapping ranges were granted together");
  locker_finish (&waiter);
  if (!locker_got (&later, 10000))
    fail ("the last waiter was not woken");
  locker_finish (&later);
  /* The waiter was queued before the 200 ms check of the later one. */
  if (waiter.waited_ns < 200000000)
    fail ("a range that waited reported less than it waited");
}

int
main (void)
{
  rangelock_init (&locks, 1);
  check_disjoint_do_not_wait ();
  check_overlaps_wait_in_order ();
  check_exclusion ();
  if (locks.head != NULL)
    fail ("ranges left in the list");
  rangelock_destroy (&locks);
  return EXIT_SUCCESS;
}
