/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The --progress bar and lines of nbdcow (progress.h). */

#include <config.h>

#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>

#include "progress.h"

#define BAR_WIDTH 40

/* Whether the cursor is at the end of a bar on the terminal: under the
 * lock of stderr, atomic for the tools that cannot see that lock.
 */
static atomic_bool line_open;

void
progress_init (struct progress *p, bool on, const char *what, uint64_t total)
{
  p->on = on;
  p->tty = isatty (STDERR_FILENO);
  p->what = what;
  p->total = total;
  p->done = 0;
  p->shown = -1;
}

void
progress_add (struct progress *p, uint64_t bytes)
{
  __atomic_fetch_add (&p->done, bytes, __ATOMIC_RELAXED);
}

static void
draw_bar (const struct progress *p, int percent, uint64_t done)
{
  int filled = percent * BAR_WIDTH / 100, i;

  flockfile (stderr);
  fprintf (stderr, "\rnbdcow %s [", p->what);
  for (i = 0; i < BAR_WIDTH; ++i)
    fputc (i < filled ? '#' : '.', stderr);
  fprintf (stderr, "] %3d%% %" PRIu64 "/%" PRIu64 " MiB", percent,
           done >> 20, p->total >> 20);
  fflush (stderr);
  line_open = true;
  funlockfile (stderr);
}

/* Off a terminal: a line for each step of 10% reached since the last
 * shown, however far the copy moved in between.
 */
static void
print_steps (const struct progress *p, int percent)
{
  int step = p->shown < 0 ? 0 : p->shown / 10 + 1;

  for (; step <= percent / 10; ++step)
    fprintf (stderr, "nbdcow %s: %d%%\n", p->what, step * 10);
}

void
progress_show (struct progress *p)
{
  uint64_t done = __atomic_load_n (&p->done, __ATOMIC_RELAXED);
  int percent = p->total ? (int) (done * 100 / p->total) : 100;

  if (!p->on || percent == p->shown)
    return;
  if (p->tty)
    draw_bar (p, percent, done);
  else
    print_steps (p, percent);
  p->shown = percent;
}

void
progress_end (struct progress *p)
{
  progress_show (p);
  flockfile (stderr);
  progress_break_line ();
  funlockfile (stderr);
}

void
progress_step (bool on, const char *what, const char *step)
{
  if (!on)
    return;
  flockfile (stderr);
  progress_break_line ();
  fprintf (stderr, "nbdcow %s: %s\n", what, step);
  funlockfile (stderr);
}

void
progress_break_line (void)
{
  if (atomic_exchange (&line_open, false))
    fputc ('\n', stderr);
}
