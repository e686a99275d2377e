/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The --progress of nbdcow, as nbdcopy has it: a bar redrawn in place
 * on a terminal, a line every 10% elsewhere.  Workers add bytes done
 * from any thread; one thread draws.
 */

#ifndef NBDCOW_PROGRESS_H
#define NBDCOW_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

struct progress {
  bool on;                      /* --progress given */
  bool tty;                     /* stderr is a terminal */
  const char *what;             /* "commit", "export" */
  uint64_t total;               /* bytes to do */
  uint64_t done;                /* added atomically */
  int shown;                    /* the last percentage shown, or -1 */
};

extern void progress_init (struct progress *p, bool on, const char *what,
                           uint64_t total);

/* From any thread. */
extern void progress_add (struct progress *p, uint64_t bytes);

/* From the drawing thread: shows the progress if it changed. */
extern void progress_show (struct progress *p);

/* Ends the bar's line on a terminal. */
extern void progress_end (struct progress *p);

/* With --progress (on), says on a line of its own that the run of what
 * ("backup") is at a step that moves no bytes it counts, such as
 * "deleting view NAME", so that it never sits silent: "nbdcow what:
 * step".  From the drawing thread, once no bar is drawn.
 */
extern void progress_step (bool on, const char *what, const char *step);

/* Ends the line of a bar drawn on the terminal, if one is open, so
 * that a message starts on a line of its own.  Call holding the lock
 * of stderr (flockfile), which every drawing of the bar takes.
 */
extern void progress_break_line (void);

#endif /* NBDCOW_PROGRESS_H */
