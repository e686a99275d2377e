/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A gate that many threads pass through at once and one may close: a
 * thread closing it waits until every thread passing has left, and
 * while it is closed no thread enters.  A closer waiting goes before
 * the threads that come after it, so that a stream of passers cannot
 * keep it waiting.  A thread passes once at a time: entering again
 * while inside could wait for a closer that waits for it.
 */

#ifndef COMMON_GATE_H
#define COMMON_GATE_H

#include <pthread.h>

#include "tsa.h"

struct CAPABILITY ("gate") gate {
  pthread_rwlock_t lock;
};

/* Returns 0, or -1 with errno set. */
extern int gate_init (struct gate *gate, unsigned rank);
extern void gate_destroy (struct gate *gate);

extern void gate_enter (struct gate *gate) TSA (acquire_shared_capability (*gate));
extern void gate_leave (struct gate *gate) TSA (release_shared_capability (*gate));

extern void gate_close (struct gate *gate) ACQUIRE (*gate);
extern void gate_open (struct gate *gate) RELEASE (*gate);

#endif /* COMMON_GATE_H */
