/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* How nbdkit ends, as far as the filter can make it: with status 1
 * when the filter failed where nbdkit would still return 0 (the kept
 * file the command line names refused the base at the first
 * connection, or a kept overlay's last flush failed).
 *
 * nbdkit returns 0 whenever it stops serving, and no nbdkit up to
 * 1.45.2 has a call for a filter to say otherwise (nbdkit_shutdown
 * stops it with 0), so the filter exits itself at the end of its
 * .unload, after every overlay is closed and the plugin unloaded.
 * Not under --run: there nbdkit's status is the command's, the
 * server's own is ignored, and the server process is the one that
 * cleans up the socket of -U -.  The process that ran .get_ready is
 * nbdkit's first; --run forks the server from it and waits, the
 * background mode forks it and returns.
 */

#ifndef COW_EXITSTATUS_H
#define COW_EXITSTATUS_H

#include <stdbool.h>

/* In .get_ready: notes the process nbdkit started in. */
extern void exitstatus_note_start (void);

/* Whether the server runs in the background: forked from the process
 * nbdkit started in, and not by --run.  Its stderr then leads nowhere
 * and nbdkit's messages go to syslog.
 */
extern bool exitstatus_in_background (void);

/* The process will end with status 1. */
extern void exitstatus_fail (void);

/* At the very end of .unload: exits with status 1 after exitstatus_fail,
 * unless the server runs under --run; otherwise returns.
 */
extern void exitstatus_exit (void);

#endif /* COW_EXITSTATUS_H */
