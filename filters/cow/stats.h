/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The statistics report of cow-stats=FILE: a JSON document, described
 * in the man page (STATISTICS), rewritten whole each time.
 */

#ifndef COW_STATS_H
#define COW_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "blk.h"

/* The NBD requests counted per export. */
enum cow_request {
  REQ_READ, REQ_WRITE, REQ_ZERO, REQ_TRIM, REQ_FLUSH, REQ_CACHE, REQ_EXTENTS,
  REQ_TYPES
};

struct export_stats {
  const char *name;
  struct blk_stats blk;
  uint64_t requests[REQ_TYPES];
  uint64_t request_bytes[REQ_TYPES];   /* bytes asked for; 0 for flush */
};

/* Writes the report of exports[0..n) to path: into path.tmp, then
 * renamed over path, so that a reader never sees half a report.
 * seconds is the time since nbdkit started serving.  Returns 0, or -1
 * with errno set (path.tmp is then removed).
 */
extern int stats_write (const char *path, double seconds,
                        const struct export_stats *exports, size_t n);

#endif /* COW_STATS_H */
