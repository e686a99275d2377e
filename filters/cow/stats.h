/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The statistics of cow-stats=FILE: each export's requests counted,
 * and the report, a JSON document (man page, STATISTICS) rewritten
 * whole every second by a thread of its own and once more at the end.
 * docs/design.md, "Statistics without contention", says how counting
 * stays off the request path's locks.
 */

#ifndef COW_STATS_H
#define COW_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "blk.h"
#include "fill.h"
#include "shardctr.h"

/* The NBD requests counted per export. */
enum cow_request {
  REQ_READ, REQ_WRITE, REQ_ZERO, REQ_TRIM, REQ_FLUSH, REQ_CACHE, REQ_EXTENTS,
  REQ_TYPES
};

/* The counters of one export: a struct shardctr of this many, the
 * requests' added to by stats_count_request, then the opens of the
 * plugin (contexts opened for the export's connections).
 */
#define STATS_PLUGIN_OPENS (2 * REQ_TYPES)
#define STATS_EXPORT_COUNTERS (STATS_PLUGIN_OPENS + 1)

static inline void
stats_count_request (struct shardctr *counters, enum cow_request type,
                     uint64_t bytes)
{
  shardctr_add (counters, 2 * type, 1);
  if (bytes)
    shardctr_add (counters, 2 * type + 1, bytes);
}

struct export_stats {
  char *name;                   /* malloc'd; NULL if there was no memory */
  unsigned connections;         /* open now */
  struct blk_stats blk;
  uint64_t requests[REQ_TYPES];
  uint64_t request_bytes[REQ_TYPES];   /* bytes asked for; 0 for flush */
  uint64_t plugin_opens;
  struct fill_progress fill;    /* under cow-fill */
};

/* Fills the requests and plugin opens of *e from counters. */
extern void stats_sum_counters (const struct shardctr *counters,
                                struct export_stats *e);

/* The server's: the opens of new export names refused
 * (cow-max-exports), and the overlays alive now and ended so far
 * (cow-lifetime=clients): throw-away ones discarded, kept ones closed;
 * the files the throw-away overlays share and the disk space they
 * take; cow-max-size (UINT64_MAX if none), the space counted against
 * it and the requests refused with ENOSPC, and those the overlays'
 * filesystems refused for want of room; the plugin's opens, ended
 * overlays' included.
 */
struct server_stats {
  uint64_t refused_names;
  uint64_t alive, discarded, closed;
  unsigned throwaway_files;
  uint64_t throwaway_bytes;
  uint64_t space_limit, space_used, space_refusals;
  uint64_t filesystem_refusals;
  uint64_t plugin_opens;
};

/* Sets *exports to a new array of the statistics of every export
 * alive, oldest first, *n to its length, and *server.  The caller
 * frees the array and its names, even on failure.  Returns 0, or -1
 * with errno set.
 */
typedef int stats_gather (struct export_stats **exports, size_t *n,
                          struct server_stats *server);

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

/* Stops the thread, if it runs, and writes the report once more. */
extern void stats_finish (void);

/* Stops the thread, if it runs: it must not outlive the exports it
 * reads; and forgets the path.
 */
extern void stats_stop (void);

#endif /* COW_STATS_H */
