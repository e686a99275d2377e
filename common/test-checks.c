/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of checks.h, built checked: a thread holds what it locked
 * and nothing another thread locked, letting go forgets it, and a
 * failed check aborts the process with its condition.
 */

#include <config.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static int failed;

static void
expect (int ok, const char *what)
{
  if (!ok) {
    fprintf (stderr, "test-checks: %s\n", what);
    failed = 1;
  }
}

static void *
other_thread (void *arg)
{
  expect (!held_by_me (&a), "another thread's lock is held");
  held_lock (&b);
  expect (held_by_me (&b), "a lock this thread took is not held");
  held_unlock (&b);
  return NULL;
}

int
main (void)
{
  pthread_t thread;
  int status;
  pid_t pid;

  held_lock (&a);
  expect (held_by_me (&a), "a lock taken is not held");
  expect (!held_by_me (&b), "a lock not taken is held");
  pthread_create (&thread, NULL, other_thread, NULL);
  pthread_join (thread, NULL);
  held_unlock (&a);
  expect (!held_by_me (&a), "a lock let go of is still held");

  pid = fork ();
  if (pid == 0) {
    fclose (stderr);            /* the check's message is expected */
    CHECK (held_by_me (&a));
    _exit (0);
  }
  expect (waitpid (pid, &status, 0) == pid && WIFSIGNALED (status) &&
          WTERMSIG (status) == SIGABRT, "a failed check did not abort");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
