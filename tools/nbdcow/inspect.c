/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow info, map and check: what an overlay file holds, and whether
 * it is sound.
 */

#include <config.h>

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "diskbytes.h"
#include "json.h"
#include "nbdcow.h"

/* Parses the options of info (--json) and check (--repair), which
 * each take one FILE.  Returns the FILE; or NULL with *status
 * EXIT_OK after --help, EXIT_ERROR after a usage message.
 */
static const char *
parse_file_args (int argc, char **argv, const char *flag, bool *set,
                 int *status)
{
  const struct option options[] = {
    { flag, no_argument, NULL, 'f' },
    HELP_OPTION,
    { NULL, 0, NULL, 0 },
  };
  int c;

  *set = false;
  *status = EXIT_ERROR;
  optind = 1;
  while ((c = subcommand_getopt (argc, argv, options)) != -1) {
    if (c == 'h')
      *status = EXIT_OK;
    if (c != 'f')
      return NULL;
    *set = true;
  }
  if (argc - optind != 1) {
    nbdcow_error ("%s: expected one FILE", argv[0]);
    subcommand_usage (argv[0], stderr);
    return NULL;
  }
  return argv[optind];
}

/* The bytes of the overlay changed since each checkpoint of h. */
static void
count_changed (const struct overlay_file *ov, const struct overlay_history *h,
               uint64_t *bytes)
{
  uint64_t blocks = kept_blocks (&ov->kept), b;
  unsigned i;

  memset (bytes, 0, h->table.count * sizeof *bytes);
  for (b = 0; b < blocks; ++b) {
    if (statemap_get (&ov->states, b) == KEPT_NOT_ALLOCATED)
      continue;
    for (i = 0; i < h->table.count; ++i)
      if (overlay_history_changed (h, b, h->table.checkpoints[i].epoch))
        bytes[i] += overlay_file_block_bytes (ov, b);
  }
}

static void
print_checkpoints_json (const struct overlay_history *h, const uint64_t *bytes)
{
  unsigned i;

  printf ("  \"checkpoints\": [");
  for (i = 0; i < h->table.count; ++i) {
    printf ("%s\n    { \"name\": ", i ? "," : "");
    json_write_string (stdout, h->table.checkpoints[i].name);
    printf (", \"changed_bytes\": %" PRIu64 " }", bytes[i]);
  }
  printf ("%s],\n  \"marks_exact\": %s,\n", h->table.count ? "\n  " : "",
          h->stale ? "false" : "true");
}

static void
print_checkpoints_text (const struct overlay_history *h, const uint64_t *bytes)
{
  unsigned i;

  if (h->table.count == 0)
    printf ("checkpoints: none\n");
  for (i = 0; i < h->table.count; ++i)
    printf ("checkpoint %s: %" PRIu64 " bytes changed since\n",
            h->table.checkpoints[i].name, bytes[i]);
  if (h->stale)
    printf ("marks of changes: not exact after a crash: every block in the "
            "overlay counts as changed since each checkpoint\n");
}

/* Why a file flagged open was not closed cleanly. */
static const char *
not_closed_why (const struct kept_header *h)
{
  if (h->flags & KEPT_FLUSH_FAILED)
    return "its writer stopped after its last flush failed";
  return "its writer crashed or was killed";
}

/*----------------------------------------------------------------------
 * info
 */

/* Whether the overlay holds the whole disk: no block reads from the
 * base, in whole or in part.
 */
static bool
is_complete (const struct overlay_counts *c)
{
  return c->blocks[KEPT_NOT_ALLOCATED] == 0 && c->blocks[KEPT_PARTIAL] == 0;
}

/* The blocks in the overlay, whole or in part. */
static uint64_t
in_overlay (const struct overlay_counts *c)
{
  return c->blocks[KEPT_ALLOCATED] + c->blocks[KEPT_PARTIAL];
}

/* The file's bytes on disk, and of them those outside the overlay's
 * blocks (kept_leaked_bytes), which nbdkit gives back when it next
 * opens the file.
 */
struct file_bytes {
  uint64_t on_disk, to_give_back;
};

/* Version 7: the records in the log (flushes whose entries the state
 * pages do not hold yet), the blocks of a last record whose data a
 * crash cut off, which a load drops, and those the last recovery
 * dropped.
 */
static void
print_log_json (const struct kept_overlay *ko)
{
  const struct kept_log *log = &ko->log;

  if (!ko->header.layout.log_length) {
    printf ("  \"log\": null,\n");
    return;
  }
  printf ("  \"log\": { \"records\": %" PRIu64 ", \"blocks_to_drop\": %"
          PRIu64 ", \"blocks_dropped\": %" PRIu32 ", \"records_lost\": %"
          PRIu64 ", \"blocks_lost\": %" PRIu64 " },\n", log->replayed,
          log->dropped, log->dropped_before, log->lost_records, log->lost);
}

static void
print_log_text (const struct kept_overlay *ko)
{
  const struct kept_log *log = &ko->log;
  char lost[KEPT_LOG_LOST_WORDS];

  if (!ko->header.layout.log_length)
    return;
  if (log->replayed)
    printf ("log: %" PRIu64 " records of flushes (nbdkit writes them into "
            "the block states when it next opens the file)\n",
            log->replayed);
  else
    printf ("log: empty (the block states hold every flush)\n");
  if (log->dropped)
    printf ("log: the last record names data a crash cut off: the change "
            "of its %" PRIu64 " blocks is dropped\n", log->dropped);
  if (log->dropped_before)
    printf ("dropped at the last recovery: the change of %" PRIu32 " blocks, "
            "whose data a crash cut off\n", log->dropped_before);
  if (log->lost_records) {
    kept_log_lost_words (log, lost);
    printf ("log: damaged: %s\n", lost);
  }
}

static void
print_info_json (const struct overlay_file *ov, const struct overlay_counts *c,
                 const struct overlay_history *hist, const uint64_t *changed,
                 const struct file_bytes *fb)
{
  const struct kept_header *h = &ov->kept.header;
  bool v1 = h->version == 1;

  printf ("{\n  \"file\": ");
  json_write_string (stdout, ov->kept.path);
  printf (",\n  \"format_version\": %" PRIu32 ",\n", h->version);
  printf ("  \"block_size\": %" PRIu64 ",\n",
          blockgeom_block_size (&h->layout.geom));
  printf ("  \"base_size\": %" PRIu64 ",\n", h->layout.geom.size);
  printf ("  \"export_name\": ");
  json_write_string (stdout, h->name);
  printf (",\n  \"blocks\": { \"base\": %" PRIu64
          ", \"overlay\": %" PRIu64 ", \"zero\": %" PRIu64
          ", \"partial\": %" PRIu64 " },\n",
          c->blocks[KEPT_NOT_ALLOCATED], in_overlay (c), c->blocks[KEPT_ZERO],
          c->blocks[KEPT_PARTIAL]);
  printf ("  \"data_bytes\": %" PRIu64 ",\n", c->bytes[KEPT_ALLOCATED]);
  printf ("  \"zero_bytes\": %" PRIu64 ",\n", c->bytes[KEPT_ZERO]);
  printf ("  \"bytes_on_disk\": %" PRIu64 ",\n", fb->on_disk);
  printf ("  \"bytes_to_give_back\": %" PRIu64 ",\n", fb->to_give_back);
  printf ("  \"complete\": %s,\n", is_complete (c) ? "true" : "false");
  printf ("  \"plugin_facts_kept\": %s,\n",
          h->facts.known ? "true" : "false");
  print_checkpoints_json (hist, changed);
  print_log_json (&ov->kept);
  if (v1)
    printf ("  \"closed_cleanly\": null,\n  \"last_flush_failed\": null,\n"
            "  \"recoveries\": null\n}\n");
  else
    printf ("  \"closed_cleanly\": %s,\n  \"last_flush_failed\": %s,\n"
            "  \"recoveries\": %" PRIu32 "\n}\n",
            h->flags & KEPT_OPEN ? "false" : "true",
            h->flags & KEPT_FLUSH_FAILED ? "true" : "false", h->recoveries);
}

static void
print_info_text (const struct overlay_file *ov, const struct overlay_counts *c,
                 const struct overlay_history *hist, const uint64_t *changed,
                 const struct file_bytes *fb)
{
  const struct kept_header *h = &ov->kept.header;

  printf ("file: %s\n", ov->kept.path);
  printf ("format version: %" PRIu32 "\n", h->version);
  printf ("block size: %" PRIu64 "\n", blockgeom_block_size (&h->layout.geom));
  printf ("base size: %" PRIu64 "\n", h->layout.geom.size);
  printf ("export name: ");
  json_write_string (stdout, h->name);
  printf ("\nblocks: %" PRIu64 " in the overlay, ", in_overlay (c));
  if (c->blocks[KEPT_PARTIAL])
    printf ("%" PRIu64 " of them in part, ", c->blocks[KEPT_PARTIAL]);
  printf ("%" PRIu64 " zero, %" PRIu64 " from the base\n",
          c->blocks[KEPT_ZERO], c->blocks[KEPT_NOT_ALLOCATED]);
  printf ("data: %" PRIu64 " bytes in the overlay, %" PRIu64 " bytes zero\n",
          c->bytes[KEPT_ALLOCATED], c->bytes[KEPT_ZERO]);
  printf ("bytes on disk: %" PRIu64 "\n", fb->on_disk);
  if (fb->to_give_back)
    printf ("bytes to give back: %" PRIu64 " (outside the overlay's "
            "blocks: writes a crash cut off, or bytes only a view kept "
            "or allocated; "
            "nbdkit gives them back when it next opens the file)\n",
            fb->to_give_back);
  if (is_complete (c) && h->facts.known)
    printf ("complete: yes (the overlay holds the whole disk: it exports "
            "and serves without its base, the plugin's facts kept)\n");
  else if (is_complete (c))
    printf ("complete: yes (the overlay holds the whole disk: it exports "
            "without its base)\n");
  if (h->version == 1)
    printf ("closed cleanly: unknown (format version 1 does not record it)\n");
  else if (h->flags & KEPT_OPEN)
    printf ("closed cleanly: no (%s: it holds what was flushed before)\n",
            not_closed_why (h));
  else
    printf ("closed cleanly: yes\n");
  if (h->version > 1)
    printf ("recoveries from crashes: %" PRIu32 "\n", h->recoveries);
  print_log_text (&ov->kept);
  if (h->layout.history)
    print_checkpoints_text (hist, changed);
}

int
cmd_info (int argc, char **argv)
{
  const char *file;
  struct overlay_file ov;
  struct overlay_history hist;
  uint64_t changed[CHECKPOINTS_MAX];
  struct overlay_counts c;
  struct file_bytes fb;
  bool json;
  int r;

  file = parse_file_args (argc, argv, "json", &json, &r);
  if (file == NULL)
    return r;
  r = overlay_file_open (&ov, file, KEPT_READ);
  if (r != EXIT_OK)
    return r;
  r = overlay_file_history (&ov, &hist);
  if (r != EXIT_OK) {
    overlay_file_close (&ov);
    return r;
  }
  fb.on_disk = disk_bytes (ov.kept.fd);
  if (kept_leaked_bytes (&ov.kept, &ov.states, &fb.to_give_back) == -1)
    r = report_kept (&ov.kept);
  else {
    overlay_file_count (&ov, &c);
    count_changed (&ov, &hist, changed);
    (json ? print_info_json : print_info_text) (&ov, &c, &hist, changed,
                                                &fb);
  }
  overlay_history_free (&hist);
  overlay_file_close (&ov);
  return r;
}

/*----------------------------------------------------------------------
 * map
 */

static int
print_run_text (uint64_t offset, uint64_t length, unsigned state,
                void *opaque)
{
  printf ("%14" PRIu64 " %14" PRIu64 "  %s\n", offset, length,
          state_name (state));
  return 0;
}

static int
print_run_json (uint64_t offset, uint64_t length, unsigned state,
                void *opaque)
{
  bool *first = opaque;

  printf ("%s\n  { \"offset\": %" PRIu64 ", \"length\": %" PRIu64
          ", \"state\": \"%s\" }", *first ? "" : ",", offset, length,
          state_name (state));
  *first = false;
  return 0;
}

int
cmd_map (int argc, char **argv)
{
  enum { OPT_JSON = 256, OPT_SINCE };
  const struct option options[] = {
    { "json", no_argument, NULL, OPT_JSON },
    { "since", required_argument, NULL, OPT_SINCE },
    HELP_OPTION,
    { NULL, 0, NULL, 0 },
  };
  const char *since = NULL;
  struct overlay_file ov;
  bool json = false, first = true;
  int c, r;

  optind = 1;
  while ((c = subcommand_getopt (argc, argv, options)) != -1) {
    if (c == OPT_JSON)
      json = true;
    else if (c == OPT_SINCE)
      since = optarg;
    else
      return c == 'h' ? EXIT_OK : EXIT_ERROR;
  }
  if (argc - optind != 1) {
    nbdcow_error ("map: expected one FILE");
    subcommand_usage ("map", stderr);
    return EXIT_ERROR;
  }
  r = overlay_file_open (&ov, argv[optind], KEPT_READ);
  if (r == EXIT_OK && since)
    r = overlay_file_since (&ov, since);
  if (r != EXIT_OK) {
    overlay_file_close (&ov);
    return r;
  }
  if (json) {
    printf ("[");
    overlay_file_each_run (&ov, print_run_json, &first);
    printf ("\n]\n");
  }
  else
    overlay_file_each_run (&ov, print_run_text, NULL);
  overlay_file_close (&ov);
  return EXIT_OK;
}

/*----------------------------------------------------------------------
 * check
 */

/* The end of the last allocated block's data, or 0. */
static int
note_allocated_end (uint64_t offset, uint64_t length, unsigned state,
                    void *opaque)
{
  uint64_t *end = opaque;

  if (state == KEPT_ALLOCATED)
    *end = offset + length;
  return 0;
}

/* A file shorter than its header says: repairable by extending it
 * only if its state area (and marks area) is whole and, unpacked, no
 * allocated block reaches past its end, whose data is gone (packed,
 * such a block is a bad state, counted by the load).  A file cut between its states and
 * its data, with no block in the overlay, lost nothing.  Returns true
 * if the file is (now) long enough.
 */
static bool
check_length (struct overlay_file *ov, bool repair)
{
  const struct kept_layout *l = &ov->kept.header.layout;
  uint64_t want = kept_min_length (&ov->kept), data_end = 0;
  struct stat st;

  if (fstat (ov->kept.fd, &st) == -1 || (uint64_t) st.st_size >= want)
    return true;
  printf ("%s: damaged: truncated to %" PRIu64 " bytes, its layout takes %"
          PRIu64 "\n", ov->kept.path, (uint64_t) st.st_size, want);
  if ((uint64_t) st.st_size < kept_metadata_end (l)) {
    printf ("%s: cannot repair: the block states are cut short%s, what "
            "they held is lost\n", ov->kept.path,
            l->log_length ? ", or the marks of changes or the log after them"
            : l->history ? ", or the marks of changes after them" : "");
    return false;
  }
  if (!l->packed)
    overlay_file_each_run (ov, note_allocated_end, &data_end);
  if (data_end > 0 && l->data_offset + data_end > (uint64_t) st.st_size) {
    printf ("%s: cannot repair: blocks in the overlay reach past the end "
            "of the file, their data is lost\n", ov->kept.path);
    return false;
  }
  if (!repair)
    return false;
  if (ftruncate (ov->kept.fd, want) == -1) {
    printf ("%s: cannot repair: ftruncate: %m\n", ov->kept.path);
    return false;
  }
  printf ("%s: repaired: extended to %" PRIu64 " bytes (past the last "
          "block in the overlay)\n", ov->kept.path, want);
  return true;
}

/* Data left in blocks not in the overlay (or in a unit's other place)
 * and a crash flag: harmless, both tidied by --repair as the filter
 * does when it opens the file.
 */
static int
check_crash_leftovers (struct overlay_file *ov, bool repair)
{
  struct kept_overlay *ko = &ov->kept;
  bool crashed = (ko->header.flags & KEPT_OPEN) != 0;
  uint64_t leaked;

  if (kept_leaked_bytes (ko, &ov->states, &leaked) == -1)
    return report_kept (ko);
  if (crashed)
    printf ("%s: not closed cleanly (%s): it holds what was flushed "
            "before\n", ko->path, not_closed_why (&ko->header));
  if (leaked)
    printf ("%s: %" PRIu64 " bytes of data outside the overlay's blocks "
            "(writes %s, or bytes only a view kept or allocated)\n",
            ko->path, leaked, crashed ? "a crash cut off"
                                      : "refused, as on a full filesystem");
  if (!repair || (!crashed && !leaked))
    return EXIT_OK;
  kept_punch_unallocated (ko, &ov->states);
  /* Marks that may miss a change stay so: only a flush makes them
   * exact, as the filter keeps the flag when it opens the file.
   */
  if (kept_set_flags (ko, ko->header.flags & KEPT_MARKS_STALE,
                      ko->header.recoveries + crashed) == -1)
    return report_kept (ko);
  printf ("%s: repaired: data outside the overlay's blocks punched, "
          "marked closed cleanly\n", ko->path);
  return EXIT_OK;
}

/* Version 7: whole records after the one that ends the log, which
 * only damage to that one leaves (kept_log).  Prints them.  Returns
 * whether there are none.
 */
static bool
check_log (const char *file, const struct kept_log *log)
{
  char lost[KEPT_LOG_LOST_WORDS];

  if (log->lost_records == 0)
    return true;
  kept_log_lost_words (log, lost);
  printf ("%s: damaged: %s (cannot repair: the record changed after its "
          "flush)\n", file, lost);
  return false;
}

/* Version 4: a copy of the checkpoint table that is not whole
 * (kept_load_table): in a file closed cleanly damage, which --repair
 * writes again from the other, the file marked MARKS_STALE (the other
 * may be older than the table was); in a file a crash left, a torn
 * write, which --repair writes again before it marks the file closed
 * cleanly.  Prints the damage.  Returns whether there is none (now).
 */
static bool
check_table (struct kept_overlay *ko, bool repair)
{
  struct kept_table table;

  if (!ko->header.layout.history)
    return true;
  if (kept_load_table (ko, &table) == -1) {
    printf ("%s: damaged: %s (cannot repair: which checkpoints the file "
            "had is unknown)\n", ko->path, ko->why);
    return false;
  }
  if (ko->table_bad == 0 || (!ko->table_damaged && !repair))
    return true;
  if (ko->table_damaged)
    printf ("%s: damaged: copy %u of the checkpoint table (closed cleanly, "
            "so no crash tore it): the other may be older than the table "
            "was%s\n", ko->path, ko->table_bad,
            repair ? "" : "; --repair writes it again from the other, "
            "every block of the overlay then counted as changed since each "
            "checkpoint");
  if (!repair)
    return false;
  if (kept_mend_table (ko, &table) == -1) {
    printf ("%s: cannot repair: %s\n", ko->path, ko->why);
    return false;
  }
  if (ko->table_damaged)
    printf ("%s: repaired: the checkpoint table written again from its "
            "whole copy; the marks are kept inexact (every block of the "
            "overlay counts as changed since each checkpoint)\n", ko->path);
  return true;
}

/* Prints the damage the load counted.  Returns whether there is none. */
static bool
report_damage (const char *file, const struct kept_damage *d, uint64_t length)
{
  if (d->invalid)
    printf ("%s: damaged: %" PRIu64 " blocks have the invalid state 3 "
            "(cannot repair: what they held is unknown)\n", file, d->invalid);
  if (d->bad_parts)
    printf ("%s: damaged: %" PRIu64 " blocks name sub-blocks they cannot hold "
            "(cannot repair: what they held is unknown)\n", file,
            d->bad_parts);
  if (d->bad_places)
    printf ("%s: damaged: %" PRIu64 " blocks name units in place 1 that "
            "they cannot have there (units they do not hold, or no slot "
            "of their own for them; cannot repair: what they held is "
            "unknown)\n", file, d->bad_places);
  if (d->shared)
    printf ("%s: damaged: %" PRIu64 " blocks have a slot that another block "
            "has too (cannot repair: what they held is unknown)\n",
            file, d->shared);
  if (d->past_end)
    printf ("%s: damaged: truncated: %" PRIu64 " blocks lie in slots past "
            "the end of the file (%" PRIu64 " bytes; cannot repair: their "
            "data is lost)\n", file, d->past_end, length);
  return d->invalid + d->bad_parts + d->bad_places + d->shared +
         d->past_end == 0;
}

int
cmd_check (int argc, char **argv)
{
  const char *file;
  struct overlay_file ov = { .states = STATEMAP_INIT };
  struct kept_damage damage;
  struct stat st;
  bool repair, sound;
  int r;

  file = parse_file_args (argc, argv, "repair", &repair, &r);
  if (file == NULL)
    return r;
  if (kept_open (&ov.kept, file, repair ? KEPT_WRITE : KEPT_READ)
      == -1)
    return report_kept (&ov.kept);
  if (kept_load_states (&ov.kept, &ov.states, &damage) == -1 ||
      fstat (ov.kept.fd, &st) == -1) {
    r = report_kept (&ov.kept);
    overlay_file_close (&ov);
    return r;
  }
  sound = report_damage (file, &damage, st.st_size);
  sound = check_log (file, &ov.kept.log) && sound;
  sound = check_table (&ov.kept, repair) && sound;
  sound = check_length (&ov, repair) && sound;
  r = sound ? check_crash_leftovers (&ov, repair) : EXIT_DAMAGED;
  if (r == EXIT_OK)
    printf ("%s: no errors found\n", file);
  overlay_file_close (&ov);
  return r;
}
