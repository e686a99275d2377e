/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Checked preconditions and the locks each thread holds (checks.h). */

#include <config.h>

#include "checks.h"

#ifdef COW_CHECKS

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* A thread's locks, behind a pthread key (as common/scratch.c says,
 * _Thread_local in a dlopen'd filter hides from ThreadSanitizer).
 */
struct held {
  unsigned n;
  const void *locks[CHECKS_MAX_HELD];
};

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

  CHECK (h->n < CHECKS_MAX_HELD);
  h->locks[h->n++] = lock;
}

void
held_remove (const void *lock)
{
  struct held *h = my_held ();
  unsigned i;

  for (i = h->n; i-- > 0; )
    if (h->locks[i] == lock) {
      h->locks[i] = h->locks[--h->n];
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
