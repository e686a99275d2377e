/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The report of cow-stats=FILE, a JSON document (man page,
 * STATISTICS) of the records of statsrecords.h, rewritten whole every
 * second by a thread of its own and once more at the end.
 * docs/design.md, "Statistics without contention", says how counting
 * stays off the request path's locks.
 */

#ifndef COW_STATS_H
#define COW_STATS_H

#include "statsrecords.h"

/* Writes the first report to path, gathered by gather, and counts the
 * report's seconds from now: a file that cannot be written stops
 * nbdkit at start, and so does a path naming anything but a regular
 * file (or a symbolic link to one, which the report then replaces), so
 * that the report never replaces what it did not make.  The report is
 * readable by its owner only: it holds the export names clients sent.
 * Returns 0, or -1 after nbdkit_error.
 */
extern int stats_init (const char *path, stats_gather *gather);

/* Starts the thread that writes the report every second (after nbdkit
 * has forked).  Returns 0, or -1 after nbdkit_error.
 */
extern int stats_start (void);

/* Has the thread write the report at once, not at its next second:
 * a connection is served, whose export the report must list.
 */
extern void stats_connection_served (void);

/* Stops the thread, if it runs, and writes the report once more. */
extern void stats_finish (void);

/* Stops the thread, if it runs: it must not outlive the exports it
 * reads; and forgets the path.
 */
extern void stats_stop (void);

#endif /* COW_STATS_H */
