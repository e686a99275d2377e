/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The progress of an overlay's fill (fillprogress.h). */

#include <config.h>

#include "fillprogress.h"

const char *
fill_state_name (enum fill_state state)
{
  static const char *const names[] = {
    [FILL_WAITING] = "waiting", [FILL_RUNNING] = "running",
    [FILL_PAUSED] = "paused", [FILL_COMPLETE] = "complete",
    [FILL_FAILED] = "failed",
  };
  return names[state];
}

void
fill_progress_read (const struct fill_progress *from,
                    struct fill_progress *to)
{
  to->state = __atomic_load_n (&from->state, __ATOMIC_ACQUIRE);
  to->filled = __atomic_load_n (&from->filled, __ATOMIC_ACQUIRE);
  to->claimed = __atomic_load_n (&from->claimed, __ATOMIC_RELAXED);
  to->size = __atomic_load_n (&from->size, __ATOMIC_RELAXED);
  to->started_ns = __atomic_load_n (&from->started_ns, __ATOMIC_RELAXED);
  to->ended_ns = __atomic_load_n (&from->ended_ns, __ATOMIC_RELAXED);
  to->read = __atomic_load_n (&from->read, __ATOMIC_RELAXED);
  to->retries = __atomic_load_n (&from->retries, __ATOMIC_RELAXED);
  to->error = __atomic_load_n (&from->error, __ATOMIC_RELAXED);
}
