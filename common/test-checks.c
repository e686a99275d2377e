/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of checks.h, built checked: a thread holds what it locked
 * and nothing another thread locked, letting go forgets it, a failed
 * check aborts the process with its condition, and so does a lock
 * taken against the ranks: a lower rank, or one of the same rank, or
 * one inside a lock that has none.
 */

#include <config.h>

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"

static pthread_mutex_t a = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t b = PTHREAD_MUTEX_INITIALIZER;
static mutex_t outer, inner, several[2], unranked;
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

/* Whether taking first, then second, aborts the process. */
static bool
aborts_taking (mutex_t *first, mutex_t *second)
{
  int status;
  pid_t pid = fork ();

  if (pid == 0) {
    fclose (stderr);            /* the check's message is expected */
    held_lock (first);
    held_lock (second);
    _exit (0);
  }
  return waitpid (pid, &status, 0) == pid && WIFSIGNALED (status) &&
         WTERMSIG (status) == SIGABRT;
}

static void
check_ranks (void)
{
  held_init (&outer, 1);
  held_init (&inner, 2);
  held_init (&several[0], 3 | CHECKS_RANK_SEVERAL);
  held_init (&several[1], 3 | CHECKS_RANK_SEVERAL);
  pthread_mutex_init (&unranked, NULL);
  expect (!aborts_taking (&outer, &inner), "locks in rank aborted");
  expect (!aborts_taking (&inner, &unranked),
          "a lock without a rank aborted inside a ranked one");
  expect (!aborts_taking (&several[0], &several[1]),
          "locks of one rank that may be several aborted in ascending order");
  expect (aborts_taking (&inner, &outer), "a lock of a lower rank was taken");
  expect (aborts_taking (&several[1], &several[0]),
          "locks of one rank were taken in descending order");
  expect (aborts_taking (&unranked, &inner),
          "a lock was taken inside one without a rank");
  held_destroy (&outer);
  held_init (&outer, 2);
  expect (aborts_taking (&outer, &inner),
          "two locks of one rank were held together");
  held_destroy (&outer);
  pthread_mutex_init (&outer, NULL);
  expect (aborts_taking (&outer, &inner),
          "a destroyed lock kept its rank");
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
  check_ranks ();
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
