/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Checked preconditions and the locks each thread holds (checks.h). */

#include <config.h>

#include "checks.h"

#ifdef COW_CHECKS

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* A thread's locks and their ranks, behind a pthread key (as
 * common/scratch.c says, _Thread_local in a dlopen'd filter hides from
 * ThreadSanitizer).
 */
struct held {
  unsigned n;
  const void *locks[CHECKS_MAX_HELD];
  unsigned ranks[CHECKS_MAX_HELD];
};

/* The ranks given, by the lock's address: an open-addressed table
 * whose entries are added under ranks_lock and read without it.  A
 * lock destroyed keeps its entry with CHECKS_RANK_LEAF, the rank of a
 * lock never given one, so that the table needs no tombstones: it
 * holds each address a lock was ever made at, which the allocator
 * hands out again.  The loads are relaxed: a lock is given its rank
 * before whatever makes it known to other threads, which orders the
 * rank before their use, and the table adds no order between threads
 * that ThreadSanitizer would take for theirs.  ranks_lock is no lock
 * of the program's: it is never noted as held.
 */
#define RANKS_BITS 20
#define RANKS_SIZE (1u << RANKS_BITS)

static const void *rank_keys[RANKS_SIZE];
static unsigned rank_values[RANKS_SIZE];
static pthread_mutex_t ranks_lock = PTHREAD_MUTEX_INITIALIZER;

/* The index of lock's entry, or of the free one where it would go. */
static uint32_t
find_entry (const void *lock)
{
  uint32_t i = (uint64_t) (uintptr_t) lock * UINT64_C (0x9e3779b97f4a7c15)
               >> (64 - RANKS_BITS);
  uint32_t tries;

  for (tries = 0; tries < RANKS_SIZE; ++tries, i = (i + 1) % RANKS_SIZE) {
    const void *key = __atomic_load_n (&rank_keys[i], __ATOMIC_RELAXED);

    if (key == lock || key == NULL)
      return i;
  }
  check_failed ("room for the rank of every lock", __FILE__, __LINE__);
}

void
held_rank (const void *lock, unsigned rank)
{
  uint32_t i;

  pthread_mutex_lock (&ranks_lock);
  i = find_entry (lock);
  __atomic_store_n (&rank_values[i], rank, __ATOMIC_RELAXED);
  __atomic_store_n (&rank_keys[i], lock, __ATOMIC_RELAXED);
  pthread_mutex_unlock (&ranks_lock);
}

void
held_unrank (const void *lock)
{
  uint32_t i;

  pthread_mutex_lock (&ranks_lock);
  i = find_entry (lock);
  if (__atomic_load_n (&rank_keys[i], __ATOMIC_RELAXED) == lock)
    __atomic_store_n (&rank_values[i], CHECKS_RANK_LEAF, __ATOMIC_RELAXED);
  pthread_mutex_unlock (&ranks_lock);
}

static unsigned
rank_of (const void *lock)
{
  uint32_t i = find_entry (lock);

  return __atomic_load_n (&rank_keys[i], __ATOMIC_RELAXED) == lock
    ? __atomic_load_n (&rank_values[i], __ATOMIC_RELAXED)
    : CHECKS_RANK_LEAF;
}

/* Whether a lock of rank rank may be taken holding held of rank
 * held_rank.
 */
static bool
ranked_after (const void *held, unsigned held_rank, const void *lock,
              unsigned rank)
{
  if ((held_rank & CHECKS_RANK_LEAF) != (rank & CHECKS_RANK_LEAF))
    return (held_rank & CHECKS_RANK_LEAF) < (rank & CHECKS_RANK_LEAF);
  return (rank & CHECKS_RANK_SEVERAL) && held_rank == rank &&
         (uintptr_t) held < (uintptr_t) lock;
}

static pthread_key_t held_key;
static pthread_once_t held_key_once = PTHREAD_ONCE_INIT;

static void
make_held_key (void)
{
  pthread_key_create (&held_key, free);
}

static struct held *
my_held (void)
{
  struct held *h;

  pthread_once (&held_key_once, make_held_key);
  h = pthread_getspecific (held_key);
  if (h == NULL) {
    h = calloc (1, sizeof *h);
    if (h == NULL || pthread_setspecific (held_key, h) != 0)
      check_failed ("the checks' memory", __FILE__, __LINE__);
  }
  return h;
}

void
check_failed (const char *cond, const char *file, int line)
{
  fprintf (stderr, "nbdkit-cow: %s:%d: check failed: %s\n", file, line, cond);
  abort ();
}

void
held_add (const void *lock)
{
  struct held *h = my_held ();
  unsigned rank = rank_of (lock), i;

  for (i = 0; i < h->n; ++i)
    if (!ranked_after (h->locks[i], h->ranks[i], lock, rank)) {
      fprintf (stderr, "nbdkit-cow: lock %p of rank %#x taken holding lock "
               "%p of rank %#x, against the lock order (docs/design.md)\n",
               lock, rank, h->locks[i], h->ranks[i]);
      abort ();
    }
  CHECK (h->n < CHECKS_MAX_HELD);
  h->locks[h->n] = lock;
  h->ranks[h->n++] = rank;
}

void
held_remove (const void *lock)
{
  struct held *h = my_held ();
  unsigned i;

  for (i = h->n; i-- > 0; )
    if (h->locks[i] == lock) {
      --h->n;
      h->locks[i] = h->locks[h->n];
      h->ranks[i] = h->ranks[h->n];
      return;
    }
  check_failed ("a lock let go of is held", __FILE__, __LINE__);
}

bool
held_by_me (const void *lock)
{
  struct held *h = my_held ();
  unsigned i;

  for (i = 0; i < h->n; ++i)
    if (h->locks[i] == lock)
      return true;
  return false;
}

#endif
