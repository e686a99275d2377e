/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A gate many pass and one closes (gate.h): a read-write lock that
 * prefers its writer, so that a closer waits only for the threads
 * inside when it came.
 */

#include <config.h>

#include <errno.h>
#include <pthread.h>

#include "checks.h"
#include "gate.h"

int
gate_init (struct gate *gate, unsigned rank)
{
  pthread_rwlockattr_t attr;
  int err;

  err = pthread_rwlockattr_init (&attr);
  if (err == 0)
    err = pthread_rwlockattr_setkind_np
      (&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  if (err == 0)
    err = pthread_rwlock_init (&gate->lock, &attr);
  pthread_rwlockattr_destroy (&attr);
  if (err != 0) {
    errno = err;
    return -1;
  }
  held_rank (gate, rank);
  return 0;
}

void
gate_destroy (struct gate *gate)
{
  held_unrank (gate);
  pthread_rwlock_destroy (&gate->lock);
}

void
gate_enter (struct gate *gate) NO_TSA
{
  pthread_rwlock_rdlock (&gate->lock);
  held_add (gate);
}

void
gate_leave (struct gate *gate) NO_TSA
{
  held_remove (gate);
  pthread_rwlock_unlock (&gate->lock);
}

void
gate_close (struct gate *gate) NO_TSA
{
  pthread_rwlock_wrlock (&gate->lock);
  held_add (gate);
}

void
gate_open (struct gate *gate) NO_TSA
{
  held_remove (gate);
  pthread_rwlock_unlock (&gate->lock);
}
