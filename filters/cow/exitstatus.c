/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The exit status the filter gives nbdkit (exitstatus.h). */

#include <config.h>

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "exitstatus.h"

static pid_t start_pid;
static atomic_bool failed;     /* set by any thread, read at the end */

void
exitstatus_note_start (void)
{
  start_pid = getpid ();
}

void
exitstatus_fail (void)
{
  failed = true;
}

/* A server forked by --run has nbdkit's first process as its parent
 * until the command has ended and it has been stopped; one forked into
 * the background lost that parent at once.
 */
static bool
under_run (void)
{
  return getpid () != start_pid && getppid () == start_pid;
}

bool
exitstatus_in_background (void)
{
  return start_pid != 0 && getpid () != start_pid && !under_run ();
}

void
exitstatus_exit (void)
{
  if (!failed || under_run ())
    return;
  fflush (NULL);
  exit (EXIT_FAILURE);
}
