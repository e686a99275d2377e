/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The waits for a set of locks (lockwaits.h). */

#include <config.h>

#include "lockwaits.h"

int
lockwaits_init (struct lockwaits *w, unsigned kinds)
{
  return shardctr_init (&w->counters, 2 * kinds);
}

void
lockwaits_free (struct lockwaits *w)
{
  shardctr_free (&w->counters);
}

void
lockwaits_wait (struct lockwaits *w, unsigned kind, mutex_t *mutex)
{
  lockwaits_add (w, kind, timed_lock_wait (mutex));
  held_add (mutex);
}

void
countedlock_init (struct countedlock *l, struct lockwaits *w, unsigned kind,
                  unsigned rank)
{
  held_init (&l->mutex, rank);
  l->waits = w;
  l->kind = kind;
}

void
countedlock_destroy (struct countedlock *l)
{
  held_destroy (&l->mutex);
}

void
lockwaits_sum (const struct lockwaits *w, unsigned kind, uint64_t *waits,
               uint64_t *ns)
{
  *waits = shardctr_sum (&w->counters, 2 * kind);
  *ns = shardctr_sum (&w->counters, 2 * kind + 1);
}
