/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The preconditions the code states ("Requires state_lock", "requires
 * the rmw locks of [first, last]"), checked in checked builds
 * (./configure --enable-checks: the fuzzer's and the sanitizers'), and
 * compiled to nothing otherwise, so they cost release builds nothing.
 *
 * CHECK (cond) aborts with the condition, file and line if cond is
 * false.  held_add and held_remove note the locks the calling thread
 * takes and lets go of; held_by_me (lock) says whether the thread holds
 * lock.  Any pointer names a lock; a thread holds at most
 * CHECKS_MAX_HELD at once.  held_lock and held_unlock take and let go
 * of a mutex, noting it (lockwaits.h takes the counted ones).
 *
 * Ranks check the lock order (docs/design.md): held_add aborts when a
 * thread takes a lock while it holds one whose rank is not lower.
 * Several locks of one rank may be held together only if the rank has
 * CHECKS_RANK_SEVERAL and they are taken in ascending address (the
 * stripes' write locks).  A lock is given its rank once, where it is
 * made (held_rank, or held_init for a mutex), and loses it where it
 * is destroyed (held_unrank, held_destroy).  A lock never given one
 * has CHECKS_RANK_LEAF, above every other: nothing may be taken
 * inside it.
 */

#ifndef COMMON_CHECKS_H
#define COMMON_CHECKS_H

#include <pthread.h>
#include <stdbool.h>

#include "tsa.h"

#define CHECKS_RANK_LEAF 0xffu
#define CHECKS_RANK_SEVERAL 0x100u

#ifdef COW_CHECKS

#define CHECKS_MAX_HELD 128

#define CHECK(cond) \
  ((cond) ? (void) 0 : check_failed (#cond, __FILE__, __LINE__))

extern void check_failed (const char *cond, const char *file, int line)
  __attribute__ ((noreturn));
extern void held_add (const void *lock);
extern void held_remove (const void *lock);
extern bool held_by_me (const void *lock);
extern void held_rank (const void *lock, unsigned rank);
extern void held_unrank (const void *lock);

#else

/* Not evaluated, but compiled: a check names only what exists. */
#define CHECK(cond) ((void) sizeof ((cond) ? 1 : 0))

static inline void held_add (const void *lock) { (void) lock; }
static inline void held_remove (const void *lock) { (void) lock; }
static inline bool held_by_me (const void *lock) { (void) lock; return true; }
static inline void held_rank (const void *lock, unsigned rank)
{
  (void) lock;
  (void) rank;
}
static inline void held_unrank (const void *lock) { (void) lock; }

#endif

/* A mutex made with rank rank, and destroyed. */
static inline void
held_init (mutex_t *mutex, unsigned rank)
{
  pthread_mutex_init (mutex, NULL);
  held_rank (mutex, rank);
}

static inline void
held_destroy (mutex_t *mutex)
{
  held_unrank (mutex);
  pthread_mutex_destroy (mutex);
}

/* The analysis cannot see pthread_mutex_lock take the lock: held_lock
 * is where it learns of it.
 */
static inline void
held_lock (mutex_t *mutex) ACQUIRE (*mutex) NO_TSA
{
  pthread_mutex_lock (mutex);
  held_add (mutex);
}

static inline void
held_unlock (mutex_t *mutex) RELEASE (*mutex) NO_TSA
{
  held_remove (mutex);
  pthread_mutex_unlock (mutex);
}

#endif /* COMMON_CHECKS_H */
