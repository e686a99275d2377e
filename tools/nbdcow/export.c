/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* nbdcow export: the overlay as a qcow2 file over the raw base, laid
 * out by qcow2.c and its data written by the engine of commit.
 */

#include <config.h>

#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "commit.h"
#include "qcow2.h"

/* The base as qemu will find it: a relative backing file name is
 * relative to the directory of the qcow2 file.  Sets *st.
 */
static int
check_base (const struct overlay *ov, const char *base, const char *out,
            struct stat *st)
{
  char *copy = strdup (out), *path = NULL;
  int r = -1;

  if (copy == NULL ||
      asprintf (&path, "%s/%s", base[0] == '/' ? "" : dirname (copy), base)
      == -1) {
    nbdcow_error ("malloc: %m");
    path = NULL;
  }
  else if (!qcow2_backing_fits (base))
    ;                           /* it said why */
  else if (stat (path, st) == -1)
    nbdcow_error ("--base=%s: %s: %m", base, path);
  else if ((uint64_t) st->st_size != ov->kf.header.layout.base_size)
    nbdcow_error ("--base=%s: %" PRIu64 " bytes, but the base of %s has %"
                  PRIu64, base, (uint64_t) st->st_size, ov->kf.path,
                  ov->kf.header.layout.base_size);
  else
    r = 0;
  free (copy);
  free (path);
  return r;
}

static bool
same_file (const struct stat *a, const struct stat *b)
{
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* Refuses an out that would overwrite the overlay or the base. */
static int
check_out (const struct overlay *ov, const char *out, const struct stat *base)
{
  struct stat o, overlay;

  if (stat (out, &o) == -1)
    return 0;                   /* a new file */
  if (fstat (ov->kf.fd, &overlay) == 0 && same_file (&o, &overlay)) {
    nbdcow_error ("%s: is the overlay itself", out);
    return -1;
  }
  if (same_file (&o, base)) {
    nbdcow_error ("%s: is the base itself", out);
    return -1;
  }
  return 0;
}

/* Writes the tables into fd (out), then the data, flushed, then the
 * header, flushed: out is a qcow2 file only once all it maps is
 * durable.
 */
static int
write_qcow2 (struct overlay *ov, const struct qcow2_layout *q, int fd,
             const char *base, const char *out, unsigned connections,
             bool progress, struct copy_totals *totals)
{
  struct target *t;
  int r;

  if (ftruncate (fd, q->clusters << q->cluster_bits) == -1) {
    nbdcow_error ("%s: ftruncate: %m", out);
    return -1;
  }
  if (qcow2_write_tables (q, ov, fd, out) == -1)
    return -1;
  t = target_open (out, connections);
  if (t == NULL)
    return -1;
  r = copy_overlay_packed (ov, t, q->data_offset, progress, "export", totals);
  target_close (t);
  if (r == -1 || qcow2_write_header (q, fd, out, base) == -1)
    return -1;
  if (fdatasync (fd) == -1) {
    nbdcow_error ("%s: fdatasync: %m", out);
    return -1;
  }
  return 0;
}

static int
export_to (struct overlay *ov, const char *base, const char *out,
           unsigned connections, bool progress, struct copy_totals *totals)
{
  struct qcow2_layout q;
  int fd, r;

  qcow2_plan (ov, &q);
  if (q.l1_entries > QCOW2_MAX_L1_ENTRIES) {
    nbdcow_error ("%s: a disk of %" PRIu64 " bytes in clusters of %u bytes "
                  "needs a larger L1 table than qemu reads", ov->kf.path,
                  q.virtual_size, 1U << q.cluster_bits);
    return -1;
  }
  fd = open (out, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd == -1) {
    nbdcow_error ("%s: %m", out);
    return -1;
  }
  r = write_qcow2 (ov, &q, fd, base, out, connections, progress, totals);
  if (close (fd) == -1 && r == 0) {
    nbdcow_error ("%s: close: %m", out);
    r = -1;
  }
  if (r == -1)
    unlink (out);               /* no half-made file is left behind */
  return r;
}

int
cmd_export (int argc, char **argv)
{
  enum { OPT_BASE = 256, OPT_CONNECTIONS, OPT_PROGRESS };
  const struct option options[] = {
    { "base", required_argument, NULL, OPT_BASE },
    { "connections", required_argument, NULL, OPT_CONNECTIONS },
    { "progress", no_argument, NULL, OPT_PROGRESS },
    { NULL, 0, NULL, 0 },
  };
  unsigned connections = DEFAULT_CONNECTIONS;
  const char *base = NULL, *out;
  bool progress = false;
  struct copy_totals totals;
  struct overlay ov;
  struct stat base_st;
  int c, r;

  optind = 1;
  while ((c = getopt_long (argc, argv, "", options, NULL)) != -1) {
    if (c == OPT_BASE)
      base = optarg;
    else if (c == OPT_CONNECTIONS &&
             parse_connections (optarg, &connections) == -1)
      return EXIT_ERROR;
    else if (c == OPT_PROGRESS)
      progress = true;
    else if (c == '?')
      return EXIT_ERROR;
  }
  if (argc - optind != 2 || base == NULL) {
    nbdcow_error ("export: expected FILE, --base=BASE and OUT (nbdcow export "
                  "[--connections=N] [--progress] FILE --base=BASE OUT)");
    return EXIT_ERROR;
  }
  out = argv[optind + 1];
  r = overlay_open (&ov, argv[optind], KEPTFILE_READ);
  if (r != EXIT_OK)
    return r;
  if (check_base (&ov, base, out, &base_st) == -1 ||
      check_out (&ov, out, &base_st) == -1 ||
      export_to (&ov, base, out, connections, progress, &totals) == -1)
    r = EXIT_ERROR;
  else
    printf ("%s: exported %" PRIu64 " bytes of data and %" PRIu64
            " bytes of zeros to %s, over %s\n", argv[optind],
            totals.data_bytes, totals.zero_bytes, out, base);
  overlay_close (&ov);
  return r;
}
