/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "json.h"
#include "stats.h"

static const char *const request_names[REQ_TYPES] = {
  [REQ_READ] = "read", [REQ_WRITE] = "write", [REQ_ZERO] = "zero",
  [REQ_TRIM] = "trim", [REQ_FLUSH] = "flush", [REQ_CACHE] = "cache",
  [REQ_EXTENTS] = "extents",
};

static void
write_export (FILE *fp, const struct export_stats *e)
{
  const struct blk_stats *b = &e->blk;
  unsigned i;

  fprintf (fp, "    {\n      \"name\": ");
  json_write_string (fp, e->name);
  fprintf (fp, ",\n"
           "      \"block_size\": %" PRIu64 ",\n"
           "      \"blocks\": { \"not_allocated\": %" PRIu64
           ", \"allocated\": %" PRIu64 ", \"zero\": %" PRIu64 " },\n"
           "      \"overlay_files\": %u,\n"
           "      \"overlay_bytes_on_disk\": %" PRIu64 ",\n"
           "      \"copy_ups\": { \"cow_on_read\": %" PRIu64
           ", \"cow_on_cache\": %" PRIu64 ", \"read_modify_write\": %" PRIu64
           " },\n"
           "      \"base_reads\": { \"requests\": %" PRIu64
           ", \"bytes\": %" PRIu64 " },\n"
           "      \"space\": { \"max\": ",
           b->block_size, b->blocks[BLK_NOT_ALLOCATED],
           b->blocks[BLK_ALLOCATED], b->blocks[BLK_ZERO], b->files,
           b->overlay_bytes,
           b->copy_ups_read, b->copy_ups_cache, b->copy_ups_rmw,
           b->base_reads, b->base_read_bytes);
  if (b->space_limit == UINT64_MAX)
    fprintf (fp, "null");
  else
    fprintf (fp, "%" PRIu64, b->space_limit);
  fprintf (fp, ", \"used\": %" PRIu64 ", \"refused_requests\": %" PRIu64
           " },\n"
           "      \"requests\": {\n", b->space_used, b->space_refusals);
  for (i = 0; i < REQ_TYPES; ++i)
    fprintf (fp, "        \"%s\": { \"count\": %" PRIu64
             ", \"bytes\": %" PRIu64 " }%s\n",
             request_names[i], e->requests[i], e->request_bytes[i],
             i + 1 < REQ_TYPES ? "," : "");
  fprintf (fp, "      },\n      \"lock_waits\": {\n");
  for (i = 0; i < BLK_LOCKS; ++i)
    fprintf (fp, "        \"%s\": { \"count\": %" PRIu64
             ", \"seconds\": %.6f }%s\n",
             blk_lock_name (i), b->lock_waits[i], b->lock_wait_ns[i] / 1e9,
             i + 1 < BLK_LOCKS ? "," : "");
  fprintf (fp, "      }\n    }");
}

int
stats_write (const char *path, double seconds,
             const struct export_stats *exports, size_t n)
{
  char *tmp;
  FILE *fp;
  size_t i;
  int saved;

  if (asprintf (&tmp, "%s.tmp", path) == -1)
    return -1;
  fp = fopen (tmp, "we");
  if (fp == NULL) {
    saved = errno;
    free (tmp);
    errno = saved;
    return -1;
  }
  fprintf (fp, "{\n  \"seconds\": %.3f,\n  \"exports\": [", seconds);
  for (i = 0; i < n; ++i) {
    fprintf (fp, i ? ",\n" : "\n");
    write_export (fp, &exports[i]);
  }
  fprintf (fp, "%s]\n}\n", n ? "\n  " : "");
  if (ferror (fp) | (fclose (fp) != 0) || rename (tmp, path) == -1) {
    saved = errno ? errno : EIO;
    unlink (tmp);
    free (tmp);
    errno = saved;
    return -1;
  }
  free (tmp);
  return 0;
}
