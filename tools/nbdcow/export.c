/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow export: the overlay as a qcow2 file over the raw base, laid
 * out by qcow2.c and its data written by the engine of commit; or,
 * with --since, what changed since a checkpoint, over the image of the
 * disk at that checkpoint (raw or qcow2, an earlier export).
 */

#include <config.h>

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commit.h"
#include "dirpath.h"
#include "divround.h"
#include "outfile.h"
#include "qcow2.h"

/* The base as qemu will find it: a relative backing file name is
 * relative to the directory of the qcow2 file.  Sets *st, and *format
 * to the base's format: a qcow2 image (an earlier export, or a copy
 * qemu-img made), else raw.
 */
static int
check_base (const struct overlay_file *ov, const char *base, const char *out,
            struct stat *st, const char **format)
{
  uint64_t size, want = ov->kept.header.layout.geom.size;
  int fd = open_backing (base, out, st, NULL, NAMED_BY_BASE), r = -1;

  if (fd == -1)
    ;                           /* it said why */
  else {
    *format = qcow2_virtual_size (fd, &size) ? "qcow2" : "raw";
    if (strcmp (*format, "raw") == 0)
      size = st->st_size;
    /* qemu-img and this export give a qcow2 image the disk's size
     * rounded up to a sector.
     */
    else if (size == div_round_up (want, 512) * 512)
      size = want;
    if (size != want)
      nbdcow_error ("--base=%s: %s%" PRIu64 " bytes, but the base of %s "
                    "has %" PRIu64, base,
                    strcmp (*format, "raw") ? "a qcow2 image of " : "", size,
                    ov->kept.path, want);
    else
      r = 0;
  }
  if (fd >= 0)
    close (fd);
  return r;
}

/* Without --base: the overlay must hold every block of the disk (a
 * complete cow-fill), so that the qcow2 file stands alone.
 */
static int
check_complete (const struct overlay_file *ov)
{
  struct overlay_counts c;
  uint64_t from_base;

  overlay_file_count (ov, &c);
  from_base = c.bytes[KEPT_NOT_ALLOCATED];
  if (from_base == 0)
    return 0;
  nbdcow_error ("export: expected FILE, --base=BASE and OUT: %s leaves %"
                PRIu64 " bytes of the disk to its base (only an overlay "
                "that holds the whole disk exports without one)",
                ov->kept.path, from_base);
  return -1;
}

/* Refuses an out that would overwrite the overlay or the base (if
 * any), or that is not a file the export could replace.
 */
static int
check_out (const struct overlay_file *ov, const char *out,
           const struct stat *base)
{
  struct stat o, overlay;

  if (stat (out, &o) == -1)
    return 0;                   /* a new file */
  if (!S_ISREG (o.st_mode)) {
    nbdcow_error ("%s: is not a regular file: name a new file for the "
                  "qcow2", out);
    return -1;
  }
  if (fstat (ov->kept.fd, &overlay) == 0 && same_file (&o, &overlay)) {
    nbdcow_error ("%s: is the overlay itself: name a new file for the "
                  "qcow2", out);
    return -1;
  }
  if (base && same_file (&o, base)) {
    nbdcow_error ("%s: is the base itself: name a new file for the qcow2",
                  out);
    return -1;
  }
  return 0;
}

/* Writes the tables, then the data, flushed, then the header, flushed:
 * the file is a qcow2 file only once all it maps is durable.
 */
static int
write_qcow2 (struct overlay_file *ov, const struct qcow2_layout *q,
             const struct out_file *o, const char *backing,
             const char *base_format, unsigned connections, bool progress,
             struct copy_totals *totals)
{
  struct qcow2_source src = qcow2_overlay_source (ov);
  struct target *t;
  int r;

  if (ftruncate (o->fd, q->clusters << q->cluster_bits) == -1) {
    nbdcow_error ("%s: ftruncate: %m", o->path);
    return -1;
  }
  if (qcow2_write_tables (q, &src, o->fd, o->path) == -1)
    return -1;
  t = target_open_fd (o->path, o->fd, connections);
  if (t == NULL)
    return -1;
  r = copy_overlay_consecutive (ov, t, q->data_offset, progress, "export",
                                totals);
  target_close (t);
  if (r == -1 ||
      qcow2_write_header (q, o->fd, o->path, backing, base_format, NULL,
                          NULL)
      == -1)
    return -1;
  if (fdatasync (o->fd) == -1) {
    nbdcow_error ("%s: fdatasync: %m", o->path);
    return -1;
  }
  return 0;
}

static int
export_to (struct overlay_file *ov, const char *base, const char *base_format,
           const char *out, unsigned connections, bool progress,
           struct copy_totals *totals)
{
  struct qcow2_source src = qcow2_overlay_source (ov);
  struct qcow2_layout q;
  struct out_file o;
  char *backing = NULL;
  int r;

  qcow2_plan (&src, &q);
  if (q.l1_entries > QCOW2_MAX_L1_ENTRIES) {
    nbdcow_error ("%s: a disk of %" PRIu64 " bytes in clusters of %u bytes "
                  "needs a larger L1 table than qemu reads", ov->kept.path,
                  q.virtual_size, 1U << q.cluster_bits);
    return -1;
  }
  if (base && (backing = backing_name (base, out)) == NULL)
    return -1;
  if (out_create (&o, out, false) == -1) {
    free (backing);
    return -1;
  }
  r = write_qcow2 (ov, &q, &o, backing, base_format, connections, progress,
                   totals);
  free (backing);
  if (r == 0)
    r = out_publish (&o);
  return out_close (&o, r == 0) == -1 ? -1 : r;
}

int
cmd_export (int argc, char **argv)
{
  enum { OPT_BASE = 256, OPT_CONNECTIONS, OPT_PROGRESS, OPT_SINCE };
  const struct option options[] = {
    { "base", required_argument, NULL, OPT_BASE },
    { "connections", required_argument, NULL, OPT_CONNECTIONS },
    { "progress", no_argument, NULL, OPT_PROGRESS },
    { "since", required_argument, NULL, OPT_SINCE },
    HELP_OPTION,
    { NULL, 0, NULL, 0 },
  };
  unsigned connections = DEFAULT_CONNECTIONS;
  const char *base = NULL, *base_format = NULL, *since = NULL, *out;
  char *out_file;
  bool progress = false;
  struct copy_totals totals;
  struct overlay_file ov;
  struct stat base_st;
  int c, r;

  optind = 1;
  while ((c = subcommand_getopt (argc, argv, options)) != -1) {
    if (c == OPT_BASE)
      base = optarg;
    else if (c == OPT_CONNECTIONS &&
             parse_connections (optarg, &connections) == -1)
      return EXIT_ERROR;
    else if (c == OPT_PROGRESS)
      progress = true;
    else if (c == OPT_SINCE)
      since = optarg;
    else if (c == 'h')
      return EXIT_OK;
    else if (c == '?')
      return EXIT_ERROR;
  }
  if (argc - optind != 2) {
    nbdcow_error ("export: expected FILE, --base=BASE and OUT");
    subcommand_usage ("export", stderr);
    return EXIT_ERROR;
  }
  out = argv[optind + 1];
  /* Through a symbolic link, as qemu-img writes: the link stays. */
  out_file = through_links (out);
  if (out_file == NULL) {
    nbdcow_error ("%s: %m", out);
    return EXIT_ERROR;
  }
  r = overlay_file_open (&ov, argv[optind], KEPT_READ);
  if (r == EXIT_OK && since && (r = overlay_file_since (&ov, since)) != EXIT_OK)
    overlay_file_close (&ov);
  else if (r == EXIT_OK) {
    /* OUT first without the base: a directory names no base's place. */
    if (check_out (&ov, out_file, NULL) == -1 ||
        (base ? check_base (&ov, base, out, &base_st, &base_format)
              : check_complete (&ov)) == -1 ||
        check_out (&ov, out_file, base ? &base_st : NULL) == -1 ||
        export_to (&ov, base, base_format, out_file, connections, progress,
                   &totals) == -1)
      r = EXIT_ERROR;
    else
      printf ("%s: exported %" PRIu64 " bytes of data and %" PRIu64
              " bytes of zeros to %s, %s%s\n", argv[optind],
              totals.data_bytes, totals.zero_bytes, out,
              base ? "over " : "standalone", base ? base : "");
    overlay_file_close (&ov);
  }
  free (out_file);
  return r;
}
