/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow export: the overlay as a qcow2 file over the raw base, laid
 * out by qcow2.c and its data written by the engine of commit; or,
 * with --since, what changed since a checkpoint, over the image of the
 * disk at that checkpoint (raw or qcow2, an earlier export).
 */

#include <config.h>

#include <errno.h>
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
  char *dir = dir_of (out), *path = NULL;
  uint64_t size, want = ov->kept.header.layout.geom.size;
  int fd = -1, r = -1;

  if (dir == NULL ||
      asprintf (&path, "%s%s%s", base[0] == '/' ? "" : dir,
                base[0] == '/' || strcmp (dir, "/") == 0 ? "" : "/",
                base) == -1) {
    nbdcow_error ("--base=%s: malloc: %m", base);
    path = NULL;
  }
  else if (!qcow2_backing_fits (base))
    ;                           /* it said why */
  else if ((fd = open (path, O_RDONLY | O_CLOEXEC)) == -1 ||
           fstat (fd, st) == -1)
    nbdcow_error ("--base=%s: %s: %m", base, path);
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
  free (dir);
  free (path);
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

/* Where the export is written: a file with no name yet in OUT's
 * directory (O_TMPFILE), named OUT only once it is complete, so that an
 * export that fails or is killed leaves no file and an earlier OUT as
 * it was.  On a filesystem without such files or without /proc, OUT
 * itself, which a failure removes and a kill leaves behind (not yet a
 * qcow2 file: its header is written last).
 */
struct out_file {
  const char *path;             /* OUT */
  char *dir;                    /* its directory */
  int fd;
  bool named;                   /* fd is OUT itself */
};

/* Where nameless files are named from (link_fd). */
#define PROC_FDS "/proc/self/fd"

/* A file with no name in dir, or -1 with errno set: EOPNOTSUPP if the
 * filesystem has no such files or, without /proc, it could not be named
 * later; EISDIR from a kernel without O_TMPFILE.
 */
static int
open_nameless (const char *dir)
{
  if (access (PROC_FDS, X_OK) == -1) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return open (dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0644);
}

static int
out_create (struct out_file *o, const char *out)
{
  o->path = out;
  o->named = false;
  o->dir = dir_of (out);
  if (o->dir == NULL) {
    nbdcow_error ("%s: malloc: %m", out);
    return -1;
  }
  o->fd = open_nameless (o->dir);
  if (o->fd >= 0)
    return 0;
  if (errno == EOPNOTSUPP || errno == EISDIR) {
    o->named = true;
    o->fd = open (out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }
  if (o->fd == -1) {
    nbdcow_error ("%s: %m", out);
    free (o->dir);
    return -1;
  }
  return 0;
}

/* Gives the nameless file of fd the name name. */
static int
link_fd (int fd, const char *name)
{
  char proc[64];

  snprintf (proc, sizeof proc, PROC_FDS "/%d", fd);
  return linkat (AT_FDCWD, proc, AT_FDCWD, name, AT_SYMLINK_FOLLOW);
}

/* Names the complete file OUT, replacing an earlier OUT in one rename
 * (from OUT.nbdcow-PID, the one name a kill can leave behind), and
 * makes the name durable.
 */
static int
out_publish (struct out_file *o)
{
  char *tmp = NULL;
  int r = o->named ? 0 : link_fd (o->fd, o->path);

  if (r == -1 && errno == EEXIST) {
    if (asprintf (&tmp, "%s.nbdcow-%ld", o->path, (long) getpid ()) == -1) {
      nbdcow_error ("%s: malloc: %m", o->path);
      return -1;
    }
    r = link_fd (o->fd, tmp);
    if (r == 0 && (r = rename (tmp, o->path)) == -1)
      unlink (tmp);
  }
  free (tmp);
  if (r == -1) {
    nbdcow_error ("%s: cannot name the exported file: %m", o->path);
    return -1;
  }
  if (sync_dir (o->dir) == -1) {
    nbdcow_error ("%s: fsync: %m", o->dir);
    return -1;
  }
  return 0;
}

/* Closes the file; a named one that is not complete is removed. */
static int
out_close (struct out_file *o, bool complete)
{
  int r = 0;

  if (close (o->fd) == -1 && complete) {
    nbdcow_error ("%s: close: %m", o->path);
    r = -1;
  }
  if (o->named && (!complete || r == -1))
    unlink (o->path);
  free (o->dir);
  return r;
}

/* Writes the tables, then the data, flushed, then the header, flushed:
 * the file is a qcow2 file only once all it maps is durable.
 */
static int
write_qcow2 (struct overlay_file *ov, const struct qcow2_layout *q,
             const struct out_file *o, const char *base,
             const char *base_format, unsigned connections, bool progress,
             struct copy_totals *totals)
{
  struct target *t;
  int r;

  if (ftruncate (o->fd, q->clusters << q->cluster_bits) == -1) {
    nbdcow_error ("%s: ftruncate: %m", o->path);
    return -1;
  }
  if (qcow2_write_tables (q, ov, o->fd, o->path) == -1)
    return -1;
  t = target_open_fd (o->path, o->fd, connections);
  if (t == NULL)
    return -1;
  r = copy_overlay_consecutive (ov, t, q->data_offset, progress, "export",
                                totals);
  target_close (t);
  if (r == -1 ||
      qcow2_write_header (q, o->fd, o->path, base, base_format) == -1)
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
  struct qcow2_layout q;
  struct out_file o;
  int r;

  qcow2_plan (ov, &q);
  if (q.l1_entries > QCOW2_MAX_L1_ENTRIES) {
    nbdcow_error ("%s: a disk of %" PRIu64 " bytes in clusters of %u bytes "
                  "needs a larger L1 table than qemu reads", ov->kept.path,
                  q.virtual_size, 1U << q.cluster_bits);
    return -1;
  }
  if (out_create (&o, out) == -1)
    return -1;
  r = write_qcow2 (ov, &q, &o, base, base_format, connections, progress,
                   totals);
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
