/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The statistics of cow-stats=FILE (stats.h): the JSON report and the
 * thread that rewrites it.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "bgthread.h"
#include "dirpath.h"
#include "json.h"
#include "monotonic.h"
#include "params.h"
#include "stats.h"

/* The report is rewritten this often, in seconds. */
#define STATS_INTERVAL 1

static const char *const request_names[REQ_TYPES] = {
  [REQ_READ] = "read", [REQ_WRITE] = "write", [REQ_ZERO] = "zero",
  [REQ_TRIM] = "trim", [REQ_FLUSH] = "flush", [REQ_CACHE] = "cache",
  [REQ_EXTENTS] = "extents",
};

/* The fill of an export under cow-fill: its state, the bytes of the
 * disk filled and to go, the plugin's bytes it read a second in this
 * run (from its start to now, or to its end), its requests tried
 * again, and its last error.
 */
static void
write_fill (FILE *fp, const struct fill_progress *f)
{
  uint64_t until = f->ended_ns ? f->ended_ns : monotonic_ns ();
  uint64_t elapsed = f->started_ns && until > f->started_ns
    ? until - f->started_ns : 0;

  if (params.fill.mode == SWITCH_OFF)
    return;
  fprintf (fp, "      \"fill\": { \"state\": \"%s\", \"filled_bytes\": %"
           PRIu64 ", \"to_go_bytes\": %" PRIu64 ", \"bytes_per_second\": %"
           PRIu64 ", \"retries\": %" PRIu64 ", \"error\": ",
           fill_state_name (f->state), f->filled,
           f->size > f->filled ? f->size - f->filled : 0,
           elapsed ? (uint64_t) (f->read * 1e9 / elapsed) : 0, f->retries);
  if (f->error != 0)
    json_write_string (fp, strerror (f->error));
  else
    fprintf (fp, "null");
  fprintf (fp, " },\n");
}

/* Under cow-view-separator: the bytes views made the overlay copy, and
 * the export's point-in-time view, its name, state and the bytes only
 * it keeps, or null.
 */
static void
write_view (FILE *fp, const struct blk_stats *b)
{
  if (params.view_separator == '\0')
    return;
  fprintf (fp, "      \"views_copied_bytes\": %" PRIu64 ",\n",
           b->view_copied);
  if (b->view_state == BLK_VIEW_NONE) {
    fprintf (fp, "      \"view\": null,\n");
    return;
  }
  fprintf (fp, "      \"view\": { \"name\": \"%s\", \"state\": \"%s\", "
           "\"kept_bytes\": %" PRIu64 " },\n", b->view_name,
           blk_view_state_name (b->view_state), b->view_kept);
}

static void
write_export (FILE *fp, const struct export_stats *e)
{
  const struct blk_stats *b = &e->blk;
  char fill_copy_ups[64] = "";  /* under cow-fill */
  unsigned i;

  if (params.fill.mode != SWITCH_OFF)
    snprintf (fill_copy_ups, sizeof fill_copy_ups, ", \"fill\": %" PRIu64,
              b->copy_ups_fill);
  fprintf (fp, "    {\n      \"name\": ");
  json_write_string (fp, e->name);
  fprintf (fp, ",\n"
           "      \"connections\": %u,\n"
           "      \"block_size\": %" PRIu64 ",\n"
           "      \"blocks\": { \"base\": %" PRIu64
           ", \"overlay\": %" PRIu64 ", \"zero\": %" PRIu64 " },\n"
           "      \"partial_blocks\": %" PRIu64 ",\n"
           "      \"overlay_files\": %u,\n"
           "      \"overlay_bytes_on_disk\": %" PRIu64 ",\n"
           "      \"copy_ups\": { \"cow_on_read\": %" PRIu64
           ", \"cow_on_cache\": %" PRIu64 ", \"read_modify_write\": %" PRIu64
           "%s },\n"
           "      \"base_reads\": { \"requests\": %" PRIu64
           ", \"bytes\": %" PRIu64 " },\n"
           "      \"plugin_opens\": %" PRIu64 ",\n"
           "      \"requests\": {\n",
           e->connections, b->block_size, b->blocks[BLK_NOT_ALLOCATED],
           b->blocks[BLK_ALLOCATED], b->blocks[BLK_ZERO],
           b->blocks[BLK_PARTIAL], b->files,
           b->overlay_bytes,
           b->copy_ups_read, b->copy_ups_cache, b->copy_ups_rmw,
           fill_copy_ups,
           b->base_reads, b->base_read_bytes, e->plugin_opens);
  for (i = 0; i < REQ_TYPES; ++i)
    fprintf (fp, "        \"%s\": { \"count\": %" PRIu64
             ", \"bytes\": %" PRIu64 " }%s\n",
             request_names[i], e->requests[i], e->request_bytes[i],
             i + 1 < REQ_TYPES ? "," : "");
  fprintf (fp, "      },\n");
  write_fill (fp, &e->fill);
  write_view (fp, b);
  fprintf (fp, "      \"lock_waits\": {\n");
  for (i = 0; i < BLK_LOCKS; ++i)
    fprintf (fp, "        \"%s\": { \"count\": %" PRIu64
             ", \"seconds\": %.6f }%s\n",
             blk_lock_name (i), b->lock_waits[i], b->lock_wait_ns[i] / 1e9,
             i + 1 < BLK_LOCKS ? "," : "");
  fprintf (fp, "      }\n    }");
}

static void
write_server (FILE *fp, const struct server_stats *server)
{
  fprintf (fp, "  \"server\": {\n"
           "    \"throwaway_files\": %u,\n"
           "    \"throwaway_bytes_on_disk\": %" PRIu64 ",\n"
           "    \"space\": { \"max\": ",
           server->throwaway_files, server->throwaway_bytes);
  if (server->space_limit == UINT64_MAX)
    fprintf (fp, "null");
  else
    fprintf (fp, "%" PRIu64, server->space_limit);
  fprintf (fp, ", \"used\": %" PRIu64 ", \"refused_requests\": %" PRIu64
           ", \"filesystem_refused_requests\": %" PRIu64 " },\n"
           "    \"plugin_opens\": %" PRIu64 "\n  },\n",
           server->space_used, server->space_refusals,
           server->filesystem_refusals, server->plugin_opens);
}

/* Writes the report of exports[0..n) to path: into a new file of its
 * own beside it (mode 0600), then renamed over path, so that a reader
 * never sees half a report.  seconds is the time since nbdkit started
 * serving.  Returns 0, or -1 with errno set (the new file is then
 * removed).
 */
static int
write_file (const char *path, double seconds,
            const struct server_stats *server,
            const struct export_stats *exports, size_t n)
{
  char *tmp;
  FILE *fp = NULL;
  size_t i;
  int fd, saved;

  if (asprintf (&tmp, "%s.XXXXXX", path) == -1)
    return -1;
  fd = mkostemp (tmp, O_CLOEXEC);
  if (fd == -1 || (fp = fdopen (fd, "w")) == NULL) {
    saved = errno;
    if (fd != -1) {
      close (fd);
      unlink (tmp);
    }
    free (tmp);
    errno = saved;
    return -1;
  }
  fprintf (fp, "{\n  \"seconds\": %.3f,\n"
           "  \"refused_export_names\": %" PRIu64 ",\n"
           "  \"overlays\": { \"alive\": %" PRIu64 ", \"discarded\": %"
           PRIu64 ", \"closed\": %" PRIu64 " },\n", seconds,
           server->refused_names, server->alive, server->discarded,
           server->closed);
  write_server (fp, server);
  fprintf (fp, "  \"exports\": [");
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

/*----------------------------------------------------------------------
 * When the report is written: by stats_init, by the thread every
 * STATS_INTERVAL seconds, and by stats_finish.  One at a time: the
 * thread runs only between stats_start and stats_stop, on the main
 * thread, which writes only outside that span.
 */

static char *report_path;               /* the file the report replaces */
static stats_gather *gather_exports;
static uint64_t start_ns;

/* Whether the last write failed, so that a failing disk logs one
 * error, not one a second.
 */
static bool failing;

/* Gathers and writes the report, logging the first of a run of
 * failures.
 */
static int
write_report (void)
{
  struct export_stats *exports = NULL;
  struct server_stats server;
  size_t n = 0, i;
  int r;

  r = gather_exports (&exports, &n, &server);
  if (r == 0)
    r = write_file (report_path, (monotonic_ns () - start_ns) / 1e9,
                    &server, exports, n);
  if (r == -1 && !failing)
    nbdkit_error ("cow-stats=%s: cannot write the statistics: %m",
                  report_path);
  failing = r == -1;
  for (i = 0; i < n; ++i)
    free (exports[i].name);
  free (exports);
  return r;
}

/* The regular file path names, through its symbolic links, which the
 * report may replace; NULL after nbdkit_error.
 */
static char *
report_file (const char *path)
{
  char *file = through_links (path);
  struct stat st;

  if (file == NULL) {
    nbdkit_error ("cow-stats=%s: %m", path);
    return NULL;
  }
  if (stat (file, &st) == 0 && !S_ISREG (st.st_mode)) {
    nbdkit_error ("cow-stats=%s: not a regular file: the report would "
                  "replace it", path);
    free (file);
    return NULL;
  }
  return file;
}

int
stats_init (const char *path, stats_gather *gather)
{
  report_path = report_file (path);
  if (report_path == NULL)
    return -1;
  gather_exports = gather;
  start_ns = monotonic_ns ();
  return write_report ();
}

/* The thread writing the report every STATS_INTERVAL seconds
 * (bgthread.h), and when the next is due: each an interval after the
 * one before, however long writing took.
 */
static struct bgthread thread = BGTHREAD_INIT;
static uint64_t next_report;
static _Atomic bool asked;      /* a report at once (stats_connection_served) */

static uint64_t
report_due (uint64_t now, void *opaque)
{
  bool due = now >= next_report;

  if (atomic_exchange (&asked, false) || due)
    write_report ();
  if (due)
    next_report += UINT64_C (1000000000) * STATS_INTERVAL;
  return next_report;
}

void
stats_connection_served (void)
{
  atomic_store (&asked, true);
  bgthread_wake (&thread);
}

int
stats_start (void)
{
  next_report = monotonic_ns () + UINT64_C (1000000000) * STATS_INTERVAL;
  if (bgthread_start (&thread, report_due, NULL) == -1) {
    nbdkit_error ("cow-stats=%s: cannot start a thread: %m", report_path);
    return -1;
  }
  return 0;
}

void
stats_finish (void)
{
  bgthread_stop (&thread);
  write_report ();
}

void
stats_stop (void)
{
  bgthread_stop (&thread);
  free (report_path);
  report_path = NULL;
}
