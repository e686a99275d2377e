/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow backup verify: each file of a backup's chain, newest first,
 * checked on its own: its header, its record and the checksums'
 * table, every L1 and L2 entry within the file and no host cluster
 * mapped twice, then every data cluster (inflated, if compressed)
 * against the checksum the backup stored when it wrote it; and the
 * chain's links (each backing file there, of the same export and
 * disk).  What is wrong is named by
 * file and offset.
 */

#include <config.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "fullio.h"
#include "nbdcow.h"
#include "outfile.h"
#include "qcow2.h"

/* The longest chain verified (more is taken for a loop). */
#define VERIFY_CHAIN_MAX 1024

/* One file of the chain, as far as it was read. */
struct verified {
  const char *path;
  int fd;
  uint64_t length;              /* of the file */
  unsigned cluster_bits;
  uint64_t size;                /* the disk's, in 512-byte sectors */
  uint64_t disk_size;           /* the disk's in bytes, as the record has it */
  uint64_t l1_offset;
  uint32_t l1_entries;
  struct qcow2_checkpoint cp;
  struct qcow2_sums sums;
  uint32_t *table;              /* the checksums, big-endian */
  uint8_t *used;                /* a byte a host cluster: mapped once */
  uint64_t data_clusters;       /* checked */
};

/* Says that f is damaged, what and where.  Returns EXIT_DAMAGED. */
static int
damaged (const struct verified *f, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));

static int
damaged (const struct verified *f, const char *fmt, ...)
{
  char what[512];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (what, sizeof what, fmt, ap);
  va_end (ap);
  nbdcow_error ("%s: damaged: %s", f->path, what);
  return EXIT_DAMAGED;
}

/* Checks the tables (refcounts, L1, L2: from the second cluster to the
 * first data cluster) against their checksum.  Returns EXIT_OK, or an
 * exit code after a message.
 */
static int
check_tables (struct verified *f)
{
  uint64_t from = UINT64_C (1) << f->cluster_bits;
  uint64_t to = f->sums.first_cluster << f->cluster_bits;
  char *buf;
  int r = EXIT_OK;

  if (to < from || to > f->length)
    return damaged (f, "its first data cluster at %" PRIu64 " out of the "
                    "file", to);
  buf = malloc (to - from ? to - from : 1);
  if (buf == NULL) {
    nbdcow_error ("%s: malloc: %m", f->path);
    return EXIT_ERROR;
  }
  if (pread_full (f->fd, buf, to - from, from) == -1) {
    nbdcow_error ("%s: read: %m", f->path);
    r = EXIT_UNUSABLE;
  }
  else if (crc32c (0, buf, to - from) != f->sums.tables_crc)
    r = damaged (f, "tables from offset %" PRIu64 " to %" PRIu64 " (refcounts, "
                 "L1, L2): their checksum does not match", from, to);
  free (buf);
  return r;
}

/* Reads the header, the record and the checksums' table, and checks
 * the tables.  Returns EXIT_OK, or an exit code after a message.
 */
static int
read_header (struct verified *f)
{
  uint8_t h[104];
  struct stat st;
  uint64_t table_bytes;
  uint32_t crc;
  int r;

  if (fstat (f->fd, &st) == -1) {
    nbdcow_error ("%s: %m", f->path);
    return EXIT_UNUSABLE;
  }
  f->length = st.st_size;
  if (pread (f->fd, h, sizeof h, 0) != (ssize_t) sizeof h ||
      qcow2_be32 (h) != QCOW2_MAGIC)
    return damaged (f, "not a qcow2 file (no qcow2 header at offset 0)");
  if (qcow2_be32 (h + 4) != QCOW2_VERSION || qcow2_be32 (h + 32) != 0 ||
      qcow2_be64 (h + 72) != 0)
    return damaged (f, "header at offset 0: a version, encryption or "
                    "feature that nbdcow backup never writes");
  f->cluster_bits = qcow2_be32 (h + 20);
  f->size = qcow2_be64 (h + 24);
  f->l1_entries = qcow2_be32 (h + 36);
  f->l1_offset = qcow2_be64 (h + 40);
  if (f->cluster_bits < 9 || f->cluster_bits > 21 ||
      f->l1_offset % (UINT64_C (1) << f->cluster_bits) ||
      f->l1_offset + (uint64_t) f->l1_entries * 8 > f->length)
    return damaged (f, "header at offset 0: clusters or L1 table out of "
                    "the file");
  if ((r = qcow2_read_checkpoint (f->fd, &f->cp)) == 0) {
    nbdcow_error ("%s: it records no checkpoint: not a backup nbdcow "
                  "wrote", f->path);
    return EXIT_UNUSABLE;
  }
  if (r == -1)
    return damaged (f, "header extensions at offset %d: the checkpoint "
                    "record is damaged", (int) sizeof h);
  f->disk_size = f->cp.disk_size;
  if ((f->disk_size + 511) / 512 * 512 != f->size)
    return damaged (f, "a disk of %" PRIu64 " bytes in the header, %" PRIu64
                    " in its record", f->size, f->disk_size);
  if (f->cp.file_length > f->length)
    return damaged (f, "file of %" PRIu64 " bytes, its record says %" PRIu64
                    " (cut short?)", f->length, f->cp.file_length);
  if (f->cp.file_length < f->length)
    return damaged (f, "file of %" PRIu64 " bytes, its record says %" PRIu64
                    " (bytes appended since it was written)", f->length,
                    f->cp.file_length);
  if ((r = qcow2_read_sums (f->fd, &f->sums)) != 1) {
    if (r == -1)
      return damaged (f, "header extensions at offset %d: the checksums' "
                      "extension is damaged", (int) sizeof h);
    nbdcow_error ("%s: it holds no checksums (made by an nbdcow without "
                  "backup verify): its data cannot be verified", f->path);
    return EXIT_UNUSABLE;
  }
  if (qcow2_header_crc (f->fd, &crc) == -1 || crc != f->sums.header_crc)
    return damaged (f, "header at offset 0 (its fields, extensions and "
                    "backing file's name): its checksum does not match");
  table_bytes = f->sums.count * 4;
  if (f->sums.offset > f->length || table_bytes > f->length - f->sums.offset)
    return damaged (f, "checksums' table at offset %" PRIu64 " out of the "
                    "file", f->sums.offset);
  f->table = malloc (table_bytes ? table_bytes : 1);
  if (f->table == NULL) {
    nbdcow_error ("%s: malloc: %m", f->path);
    return EXIT_ERROR;
  }
  if (pread_full (f->fd, f->table, table_bytes, f->sums.offset) == -1) {
    nbdcow_error ("%s: read: %m", f->path);
    return EXIT_UNUSABLE;
  }
  if (crc32c (0, f->table, table_bytes) != f->sums.crc)
    return damaged (f, "checksums' table at offset %" PRIu64 ": its "
                    "checksum does not match", f->sums.offset);
  return check_tables (f);
}

/* Checks the len bytes of the disk's cluster c, read into buf, against
 * their checksum: the next in the table, which lists the data clusters
 * in the disk's order.  Returns EXIT_OK, or an exit code after a
 * message.
 */
static int
check_sum (struct verified *f, uint64_t c, uint64_t host, const char *buf,
           uint64_t len)
{
  uint64_t rank = f->data_clusters++;

  if (rank >= f->sums.count)
    return damaged (f, "data cluster at offset %" PRIu64 " (disk offset %"
                    PRIu64 "): more data clusters than its %" PRIu64
                    " checksums", host, c << f->cluster_bits, f->sums.count);
  if (htobe32 (crc32c (0, buf, len)) != f->table[rank])
    return damaged (f, "data cluster at offset %" PRIu64 " (disk offset %"
                    PRIu64 "): its checksum does not match", host,
                    c << f->cluster_bits);
  return EXIT_OK;
}

/* The bytes of the disk's cluster c (less at the disk's end). */
static uint64_t
disk_bytes_of (const struct verified *f, uint64_t c)
{
  uint64_t cluster = UINT64_C (1) << f->cluster_bits;
  uint64_t at = c << f->cluster_bits;

  return f->disk_size - at < cluster ? f->disk_size - at : cluster;
}

/* Checks the data cluster of the disk's cluster c at host against its
 * checksum, reading it into buf.  Returns EXIT_OK, or an exit code
 * after a message.
 */
static int
check_data (struct verified *f, uint64_t c, uint64_t host, char *buf)
{
  uint64_t cluster = UINT64_C (1) << f->cluster_bits;
  uint64_t at = c << f->cluster_bits;
  uint64_t len = disk_bytes_of (f, c);
  uint64_t index = (host >> f->cluster_bits) - f->sums.first_cluster;

  if (host % cluster || host + cluster > f->sums.offset ||
      (host >> f->cluster_bits) < f->sums.first_cluster ||
      index >= f->sums.count)
    return damaged (f, "L2 entry of disk offset %" PRIu64 ": data at %"
                    PRIu64 ", out of the data area", at, host);
  if (f->used[index]++)
    return damaged (f, "data cluster at offset %" PRIu64 " mapped twice "
                    "(again at disk offset %" PRIu64 ")", host, at);
  if (pread_full (f->fd, buf, len, host) == -1) {
    nbdcow_error ("%s: read at %" PRIu64 ": %m", f->path, host);
    return EXIT_UNUSABLE;
  }
  return check_sum (f, c, host, buf, len);
}

/* Checks the compressed cluster of L2 entry e, of the disk's cluster
 * c, against its checksum, inflating it into buf.  Returns EXIT_OK,
 * or an exit code after a message.
 */
static int
check_compressed (struct verified *f, uint64_t c, uint64_t e, char *buf)
{
  uint64_t host, bytes;
  int r;

  qcow2_compressed_place (f->cluster_bits, e, &host, &bytes);
  if (!(f->sums.flags & QCOW2_SUMS_PACKED))
    return damaged (f, "L2 entry of disk offset %" PRIu64 ": a compressed "
                    "cluster in a file whose data nbdcow did not compress",
                    c << f->cluster_bits);
  if (host < f->sums.first_cluster << f->cluster_bits ||
      host > f->sums.offset || bytes > f->sums.offset - host)
    return damaged (f, "L2 entry of disk offset %" PRIu64 ": compressed "
                    "data at %" PRIu64 ", out of the data area",
                    c << f->cluster_bits, host);
  r = qcow2_read_compressed (f->fd, f->cluster_bits, e, buf);
  if (r == -1) {
    nbdcow_error ("%s: read at %" PRIu64 ": %m", f->path, host);
    return EXIT_UNUSABLE;
  }
  if (r == 1)
    return damaged (f, "compressed cluster at offset %" PRIu64 " (disk "
                    "offset %" PRIu64 "): it does not inflate to a cluster",
                    host, c << f->cluster_bits);
  return check_sum (f, c, host, buf, disk_bytes_of (f, c));
}

/* Checks every entry of the L2 table at l2 (of L1 entry i) and the data
 * it maps.  Returns EXIT_OK, or an exit code after a message.
 */
static int
check_l2 (struct verified *f, uint64_t i, uint64_t l2, char *buf)
{
  uint64_t per_l2 = UINT64_C (1) << (f->cluster_bits - 3), j;
  uint64_t clusters = (f->size + (UINT64_C (1) << f->cluster_bits) - 1)
    >> f->cluster_bits;
  uint8_t entry[8];
  int r;

  if (l2 % (UINT64_C (1) << f->cluster_bits) ||
      l2 + (per_l2 << 3) > f->length)
    return damaged (f, "L1 entry %" PRIu64 ": L2 table at %" PRIu64 " out "
                    "of the file", i, l2);
  for (j = 0; j < per_l2 && i * per_l2 + j < clusters; ++j) {
    uint64_t e, host;

    if (pread_full (f->fd, entry, 8, l2 + j * 8) == -1) {
      nbdcow_error ("%s: read at %" PRIu64 ": %m", f->path, l2 + j * 8);
      return EXIT_UNUSABLE;
    }
    e = qcow2_be64 (entry);
    host = e & QCOW2_OFFSET_MASK;
    if (e & QCOW2_OFLAG_COMPRESSED)
      r = check_compressed (f, i * per_l2 + j, e, buf);
    else if (host == 0)
      continue;
    else if (e & QCOW2_OFLAG_ZERO)
      r = damaged (f, "L2 entry at %" PRIu64 ": zero with data", l2 + j * 8);
    else
      r = check_data (f, i * per_l2 + j, host, buf);
    if (r != EXIT_OK)
      return r;
  }
  return EXIT_OK;
}

/* Checks f's structure and data.  Returns EXIT_OK, or an exit code
 * after a message.
 */
static int
check_file (struct verified *f)
{
  char *buf;
  uint8_t entry[8];
  uint64_t i;
  int r = read_header (f);

  if (r != EXIT_OK)
    return r;
  f->used = calloc (f->sums.count ? f->sums.count : 1, 1);
  buf = malloc (UINT64_C (1) << f->cluster_bits);
  if (f->used == NULL || buf == NULL) {
    nbdcow_error ("%s: malloc: %m", f->path);
    free (buf);
    return EXIT_ERROR;
  }
  for (i = 0; r == EXIT_OK && i < f->l1_entries; ++i) {
    uint64_t l2;

    if (pread_full (f->fd, entry, 8, f->l1_offset + i * 8) == -1) {
      nbdcow_error ("%s: read at %" PRIu64 ": %m", f->path,
                    f->l1_offset + i * 8);
      r = EXIT_UNUSABLE;
    }
    else if ((l2 = qcow2_be64 (entry) & QCOW2_OFFSET_MASK) != 0)
      r = check_l2 (f, i, l2, buf);
  }
  free (buf);
  if (r == EXIT_OK && f->data_clusters != f->sums.count)
    r = damaged (f, "%" PRIu64 " data clusters mapped, %" PRIu64 " in its "
                 "checksums' table", f->data_clusters, f->sums.count);
  return r;
}

/* Checks that older, behind newer, is the backup newer was made over:
 * of its checkpoint, so of the same export and disk.
 */
static int
check_link (const struct verified *newer, const struct verified *older)
{
  if (strcmp (newer->sums.base_identity, older->cp.identity) == 0 &&
      strcmp (newer->cp.export, older->cp.export) == 0 &&
      newer->disk_size == older->disk_size)
    return EXIT_OK;
  nbdcow_error ("%s: its backing file %s is not the backup it was made "
                "over (checkpoint \"%s\" of export \"%s\", %" PRIu64
                " bytes; it was made over checkpoint identity \"%s\" of "
                "export \"%s\", %" PRIu64 " bytes)", newer->path,
                older->path, older->cp.name, older->cp.export,
                older->disk_size, newer->sums.base_identity,
                newer->cp.export, newer->disk_size);
  return EXIT_DAMAGED;
}

static void
release (struct verified *f)
{
  if (f->fd >= 0)
    close (f->fd);
  free (f->table);
  free (f->used);
}

/* Verifies the chain from file.  Returns the exit code. */
static int
verify_chain (const char *file)
{
  struct verified prev = { .fd = -1 }, f;
  char name[QCOW2_MAX_BACKING + 1], *path = NULL, *from = NULL;
  unsigned files = 0;
  int r = EXIT_OK, has;

  snprintf (name, sizeof name, "%s", file_name (file));
  from = strdup (file);
  while (r == EXIT_OK && from != NULL) {
    f = (struct verified) {
      .fd = open_backing (name, from, NULL, &path,
                          files ? NAMED_BY_OUT : NAMED_BY_USER),
    };
    f.path = path;
    if (f.fd == -1) {
      r = EXIT_UNUSABLE;
      break;
    }
    r = check_file (&f);
    if (r == EXIT_OK && files > 0)
      r = check_link (&prev, &f);
    if (r == EXIT_OK)
      printf ("%s: sound: %" PRIu64 " data clusters match their "
              "checksums\n", path, f.data_clusters);
    has = r == EXIT_OK ? qcow2_backing_name (f.fd, name) : 0;
    if (has == -1)
      r = damaged (&f, "the backing file's name in the header is damaged");
    release (&prev);
    free ((char *) prev.path);
    prev = f;
    free (from);
    from = has == 1 ? strdup (path) : NULL;
    if (++files == VERIFY_CHAIN_MAX && has == 1) {
      nbdcow_error ("%s: a chain of more than %d files (a loop?)", file,
                    VERIFY_CHAIN_MAX);
      r = EXIT_DAMAGED;
    }
  }
  release (&prev);
  free ((char *) prev.path);
  free (from);
  if (r == EXIT_OK)
    printf ("%s: a chain of %u backup%s, every one sound\n", file, files,
            files == 1 ? "" : "s");
  return r;
}

int
cmd_backup_verify (int argc, char **argv)
{
  const struct option options[] = {
    HELP_OPTION,
    { NULL, 0, NULL, 0 },
  };
  int c;

  optind = 1;
  while ((c = subcommand_getopt (argc, argv, options)) != -1)
    if (c == 'h' || c == '?')
      return c == 'h' ? EXIT_OK : EXIT_ERROR;
  if (argc - optind != 1) {
    nbdcow_error ("backup verify: expected FILE");
    subcommand_usage ("backup", stderr);
    return EXIT_ERROR;
  }
  return verify_chain (argv[optind]);
}
