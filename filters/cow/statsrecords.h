/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The records of the statistics (cow-stats=FILE): the counters each
 * export's requests are counted into, and what the report is made of,
 * for one export and for the server.
 */

#ifndef COW_STATSRECORDS_H
#define COW_STATSRECORDS_H

#include <stddef.h>
#include <stdint.h>

#include "blk.h"
#include "fillprogress.h"
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

#endif /* COW_STATSRECORDS_H */
