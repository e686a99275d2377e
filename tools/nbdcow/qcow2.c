/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The qcow2 file of nbdcow export (qcow2.h), after qemu's description
 * of the format (docs/interop/qcow2.txt in qemu's tree).  Every field
 * on disk is big-endian.
 */

#include <config.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clusterzip.h"
#include "crc32c.h"
#include "divround.h"
#include "fullio.h"
#include "qcow2.h"

#define HEADER_LENGTH 104       /* version 3's fields, up to header_length */
#define EXT_BACKING_FORMAT 0xe2792acaU
#define EXT_CHECKPOINT 0x6e626377U     /* "nbcw" */
#define EXT_SUMS 0x6e626373U           /* "nbcs" */
#define SUMS_LENGTH (40 + QCOW2_IDENTITY_MAX + 1)
#define SUMS_HEADER_CRC 32     /* where header_crc lies in it */
#define SUMS_FLAGS 36          /* zero in the files of older nbdcow */
#define EXT_SPACE (8 + QCOW2_CHECKPOINT_EXPORT_MAX + 1 + \
                   CHECKPOINT_NAME_MAX + 1 + QCOW2_IDENTITY_MAX + 1 + \
                   2 * 21 + 8)
#define REFCOUNT_ORDER 4        /* 16-bit refcounts */
#define MAX_CLUSTER_BITS 21     /* 2M */
#define SECTOR_SIZE 512

/* Extended L2 entries (QCOW2_INCOMPAT_EXTL2): each standard entry
 * followed by the bitmap of its 32 subclusters, bit i allocated, bit
 * 32 + i reading zeros.
 */
#define SUBCLUSTERS 32
#define SUBCLUSTERS_ALLOCATED UINT64_C (0xffffffff)
#define SUBCLUSTERS_ZERO (UINT64_C (0xffffffff) << 32)

static uint64_t
cluster_size (const struct qcow2_layout *q)
{
  return UINT64_C (1) << q->cluster_bits;
}

/* The entries of an L2 table: a cluster of 8-byte entries, 16-byte
 * extended ones.
 */
static unsigned
l2_entry_shift (const struct qcow2_layout *q)
{
  return q->extended ? 4 : 3;
}

/* Bytes of the disk one L2 table maps. */
static unsigned
l2_shift (const struct qcow2_layout *q)
{
  return 2 * q->cluster_bits - l2_entry_shift (q);
}

/* Whether the blocks of a run of this state are in the file, and
 * whether it has their data clusters (a block held in part has all of
 * its own, its subclusters allocated those it holds).
 */
static bool
mapped (unsigned state)
{
  return state != KEPT_NOT_ALLOCATED;
}

static bool
has_data (unsigned state)
{
  return state == KEPT_ALLOCATED || state == KEPT_PARTIAL;
}

/* A compressed entry's offset takes the low 62 - (cluster_bits - 8)
 * bits, the count of 512-byte sectors it spans past the first the next
 * cluster_bits - 8.
 */
static unsigned
sectors_shift (unsigned cluster_bits)
{
  return 62 - (cluster_bits - 8);
}

uint64_t
qcow2_compressed_entry (const struct qcow2_layout *q, uint64_t offset,
                        uint64_t n)
{
  uint64_t more = (offset + n - 1) / SECTOR_SIZE - offset / SECTOR_SIZE;

  return QCOW2_OFLAG_COMPRESSED | more << sectors_shift (q->cluster_bits) |
    offset;
}

void
qcow2_compressed_place (unsigned cluster_bits, uint64_t entry,
                        uint64_t *offset, uint64_t *bytes)
{
  unsigned shift = sectors_shift (cluster_bits);
  uint64_t sectors = (entry >> shift & ((UINT64_C (1) << (cluster_bits - 8))
                                        - 1)) + 1;

  *offset = entry & ((UINT64_C (1) << shift) - 1);
  *bytes = sectors * SECTOR_SIZE - *offset % SECTOR_SIZE;
}

int
qcow2_read_compressed (int fd, unsigned cluster_bits, uint64_t entry,
                       void *cluster)
{
  uint64_t at, bytes;
  char *z;
  int r = -1;

  qcow2_compressed_place (cluster_bits, entry, &at, &bytes);
  z = malloc (bytes);
  if (z != NULL && pread_full (fd, z, bytes, at) == 0)
    r = clusterzip_inflate (z, bytes, cluster,
                            UINT64_C (1) << cluster_bits) == 0 ? 0 : 1;
  free (z);
  return r;
}

/*----------------------------------------------------------------------
 * The plan.
 */

struct count {
  struct qcow2_layout *q;
  bool any;                     /* an L2 table counted yet */
  uint64_t last_l2;             /* the index of the last one */
};

static int
count_run (uint64_t offset, uint64_t length, unsigned state, void *opaque)
{
  struct count *n = opaque;
  struct qcow2_layout *q = n->q;
  uint64_t first, last;

  if (!mapped (state) || length == 0)
    return 0;
  first = offset >> l2_shift (q);
  last = (offset + length - 1) >> l2_shift (q);
  q->l2_tables += last - first + 1 - (n->any && n->last_l2 == first);
  n->any = true;
  n->last_l2 = last;
  if (has_data (state))
    q->data_clusters += div_round_up (length, cluster_size (q));
  return 0;
}

/* The overlay_run_fn that finds a block held in part. */
static int
find_partial (uint64_t offset, uint64_t length, unsigned state, void *opaque)
{
  (void) offset;
  (void) length;
  (void) opaque;
  return state == KEPT_PARTIAL;
}

/* The refcount blocks and table that count every cluster, themselves
 * included: the least fixed point, reached from below.
 */
static void
plan_refcounts (struct qcow2_layout *q, uint64_t other_clusters)
{
  uint64_t per_block = cluster_size (q) * 8 >> REFCOUNT_ORDER;
  uint64_t blocks = 1, table = 1;

  for (;;) {
    uint64_t total = other_clusters + blocks + table;
    uint64_t need_blocks = div_round_up (total, per_block);
    uint64_t need_table = div_round_up (need_blocks * 8, cluster_size (q));

    if (need_blocks <= blocks && need_table <= table)
      break;
    if (need_blocks > blocks)
      blocks = need_blocks;
    if (need_table > table)
      table = need_table;
  }
  q->refcount_blocks = blocks;
  q->refcount_table_clusters = table;
}

static int
overlay_block_runs (const void *disk, overlay_run_fn *fn, void *opaque)
{
  return overlay_file_each_block_run (disk, fn, opaque);
}

static uint32_t
overlay_parts (const void *disk, uint64_t b)
{
  const struct overlay_file *ov = disk;

  return kept_parts_get (&ov->kept, b);
}

struct qcow2_source
qcow2_overlay_source (const struct overlay_file *ov)
{
  return (struct qcow2_source) {
    .geom = &ov->kept.header.layout.geom,
    .part_shift = ov->kept.header.layout.part_shift,
    .each_block_run = overlay_block_runs, .parts = overlay_parts, .disk = ov,
  };
}

void
qcow2_plan (const struct qcow2_source *src, struct qcow2_layout *q)
{
  struct count n = { .q = q };
  uint64_t c;

  memset (q, 0, sizeof *q);
  q->cluster_bits = src->geom->shift;
  if (q->cluster_bits > MAX_CLUSTER_BITS)
    q->cluster_bits = MAX_CLUSTER_BITS;
  q->extended = src->each_block_run (src->disk, find_partial, NULL) == 1;
  /* qemu counts a disk in 512-byte sectors, rounding a qcow2 file's size
   * down and a raw file's up: the size is the base's, rounded up.
   */
  q->virtual_size = div_round_up (src->geom->size, SECTOR_SIZE) * SECTOR_SIZE;
  q->l1_entries = div_round_up (q->virtual_size, UINT64_C (1) << l2_shift (q));
  q->l1_clusters = div_round_up (q->l1_entries * 8, cluster_size (q));
  if (q->l1_clusters == 0)
    q->l1_clusters = 1;
  src->each_block_run (src->disk, count_run, &n);
  plan_refcounts (q, 1 + q->l1_clusters + q->l2_tables + q->data_clusters);

  c = cluster_size (q);
  q->refcount_table_offset = c;
  q->refcount_blocks_offset = q->refcount_table_offset +
    q->refcount_table_clusters * c;
  q->l1_offset = q->refcount_blocks_offset + q->refcount_blocks * c;
  q->l2_offset = q->l1_offset + q->l1_clusters * c;
  q->data_offset = q->l2_offset + q->l2_tables * c;
  q->clusters = q->data_offset / c + q->data_clusters;
}

/*----------------------------------------------------------------------
 * The tables.
 */

static int
write_at (int fd, const char *out, const void *buf, uint64_t count,
          uint64_t offset)
{
  if (pwrite_full (fd, buf, count, offset) == -1) {
    nbdcow_error ("%s: write at %" PRIu64 ": %m", out, offset);
    return -1;
  }
  return 0;
}

/* The refcount of cluster i of the file: 1, or for packed data as
 * many as the data clusters it holds.
 */
static uint16_t
refcount_of (const struct qcow2_layout *q, const struct qcow2_source *src,
             uint64_t i)
{
  uint64_t first = q->data_offset >> q->cluster_bits;

  if (src->packed == NULL || i < first)
    return i < q->clusters;
  return i - first < src->packed->clusters ? src->packed->refcounts[i - first]
                                           : 0;
}

/* Each refcount table entry points to its refcount block, each block
 * counts its clusters.
 */
static int
write_refcounts (const struct qcow2_layout *q, const struct qcow2_source *src,
                 int fd, const char *out, void *cluster)
{
  uint64_t c = cluster_size (q), per_table = c / 8, per_block = c / 2;
  uint64_t *entry = cluster;
  uint16_t *count = cluster;
  uint64_t i, j;

  for (i = 0; i < q->refcount_table_clusters; ++i) {
    for (j = 0; j < per_table; ++j) {
      uint64_t block = i * per_table + j;

      entry[j] = block < q->refcount_blocks
        ? htobe64 (q->refcount_blocks_offset + block * c) : 0;
    }
    if (write_at (fd, out, cluster, c, q->refcount_table_offset + i * c) == -1)
      return -1;
  }
  for (i = 0; i < q->refcount_blocks; ++i) {
    for (j = 0; j < per_block; ++j)
      count[j] = htobe16 (refcount_of (q, src, i * per_block + j));
    if (write_at (fd, out, cluster, c, q->refcount_blocks_offset + i * c)
        == -1)
      return -1;
  }
  return 0;
}

/* The L2 tables, filled one at a time in the order of the disk. */
struct mapper {
  const struct qcow2_layout *q;
  const struct qcow2_source *src;
  int fd;
  const char *out;
  uint64_t *l1;                 /* the whole L1 table */
  uint64_t *l2;                 /* the table being filled */
  bool have_l2;
  uint64_t l2_index;            /* of the table being filled */
  uint64_t l2_written;          /* tables written so far */
  uint64_t data_mapped;         /* data clusters mapped so far */
};

static int
write_l2 (struct mapper *m)
{
  uint64_t c = cluster_size (m->q);
  uint64_t at = m->q->l2_offset + m->l2_written * c;

  if (!m->have_l2)
    return 0;
  if (write_at (m->fd, m->out, m->l2, c, at) == -1)
    return -1;
  m->l1[m->l2_index] = htobe64 (at | QCOW2_OFLAG_COPIED);
  m->l2_written++;
  m->have_l2 = false;
  return 0;
}

/* The subclusters of cluster c, of a block held in part, that hold
 * sub-blocks the block holds: a sub-block is as large as a subcluster,
 * or spans several (of blocks larger than the largest cluster).
 */
static uint64_t
held_subclusters (const struct mapper *m, uint64_t c)
{
  const struct qcow2_source *src = m->src;
  uint64_t at = c << m->q->cluster_bits;
  uint64_t b = blockgeom_block (src->geom, at);
  uint64_t in_block = at - blockgeom_start (src->geom, b);
  uint32_t parts = src->parts (src->disk, b);
  unsigned sub_bits = m->q->cluster_bits - __builtin_ctz (SUBCLUSTERS), i;
  uint64_t bits = 0;

  for (i = 0; i < SUBCLUSTERS; ++i) {
    uint64_t part = (in_block + ((uint64_t) i << sub_bits)) >> src->part_shift;

    if (parts >> part & 1)
      bits |= UINT64_C (1) << i;
  }
  return bits;
}

/* The L2 entry of the data cluster of this rank among them. */
static uint64_t
data_entry (const struct mapper *m, uint64_t rank)
{
  if (m->src->packed)
    return m->src->packed->entries[rank];
  return (m->q->data_offset + (rank << m->q->cluster_bits)) |
    QCOW2_OFLAG_COPIED;
}

/* Sets the L2 entry of cluster c, of a run in state, to the next data
 * cluster if it has one.
 */
static void
set_entry (struct mapper *m, uint64_t c, unsigned state)
{
  const struct qcow2_layout *q = m->q;
  uint64_t index = c % (cluster_size (q) >> l2_entry_shift (q));
  uint64_t entry = has_data (state) ? data_entry (m, m->data_mapped) : 0;
  uint64_t bitmap = 0;

  if (!q->extended) {
    m->l2[index] = htobe64 (state == KEPT_ZERO ? QCOW2_OFLAG_ZERO : entry);
    return;
  }
  if (state == KEPT_ZERO)
    bitmap = SUBCLUSTERS_ZERO;
  else if (state == KEPT_ALLOCATED)
    bitmap = SUBCLUSTERS_ALLOCATED;
  else
    bitmap = held_subclusters (m, c);
  m->l2[2 * index] = htobe64 (entry);
  m->l2[2 * index + 1] = htobe64 (bitmap);
}

static int
map_run (uint64_t offset, uint64_t length, unsigned state, void *opaque)
{
  struct mapper *m = opaque;
  const struct qcow2_layout *q = m->q;
  uint64_t per_l2 = cluster_size (q) >> l2_entry_shift (q);
  uint64_t c, end;

  if (!mapped (state) || length == 0)
    return 0;
  end = (offset + length - 1) >> q->cluster_bits;
  for (c = offset >> q->cluster_bits; c <= end; ++c) {
    uint64_t table = c / per_l2;

    if (m->have_l2 && table != m->l2_index && write_l2 (m) == -1)
      return -1;
    if (!m->have_l2) {
      memset (m->l2, 0, cluster_size (q));
      m->l2_index = table;
      m->have_l2 = true;
    }
    set_entry (m, c, state);
    if (has_data (state))
      m->data_mapped++;
  }
  return 0;
}

static int
write_maps (const struct qcow2_layout *q, const struct qcow2_source *src,
            int fd, const char *out, void *cluster)
{
  struct mapper m = { .q = q, .src = src, .fd = fd, .out = out,
                      .l2 = cluster };
  int r;

  m.l1 = calloc (q->l1_clusters, cluster_size (q));
  if (m.l1 == NULL) {
    nbdcow_error ("%s: calloc: %m", out);
    return -1;
  }
  r = src->each_block_run (src->disk, map_run, &m);
  if (r == 0)
    r = write_l2 (&m);
  if (r == 0 && (m.l2_written != q->l2_tables ||
                 m.data_mapped != q->data_clusters)) {
    nbdcow_error ("%s: internal error: %" PRIu64 " L2 tables and %" PRIu64
                  " data clusters planned, %" PRIu64 " and %" PRIu64 " made",
                  out, q->l2_tables, q->data_clusters, m.l2_written,
                  m.data_mapped);
    r = -1;
  }
  if (r == 0)
    r = write_at (fd, out, m.l1, q->l1_clusters * cluster_size (q),
                  q->l1_offset);
  free (m.l1);
  return r;
}

int
qcow2_write_tables (const struct qcow2_layout *q,
                    const struct qcow2_source *src, int fd, const char *out)
{
  void *cluster = malloc (cluster_size (q));
  int r;

  if (cluster == NULL) {
    nbdcow_error ("%s: malloc: %m", out);
    return -1;
  }
  r = write_refcounts (q, src, fd, out, cluster);
  if (r == 0)
    r = write_maps (q, src, fd, out, cluster);
  free (cluster);
  return r;
}

/*----------------------------------------------------------------------
 * The header.
 */

static void
put32 (uint8_t *p, uint32_t v)
{
  v = htobe32 (v);
  memcpy (p, &v, 4);
}

static void
put64 (uint8_t *p, uint64_t v)
{
  v = htobe64 (v);
  memcpy (p, &v, 8);
}

bool
qcow2_backing_fits (const char *backing)
{
  if (strlen (backing) <= QCOW2_MAX_BACKING)
    return true;
  nbdcow_error ("--base=%s: longer than qcow2's %d bytes", backing,
                QCOW2_MAX_BACKING);
  return false;
}

bool
qcow2_virtual_size (int fd, uint64_t *size)
{
  uint8_t buf[32];

  if (pread (fd, buf, sizeof buf, 0) != sizeof buf)
    return false;
  *size = qcow2_be64 (buf + 24);
  return qcow2_be32 (buf) == QCOW2_MAGIC;
}

/* Puts the extension of type with the n bytes of data at p, padded to
 * 8 bytes.  Returns the bytes taken.
 */
static size_t
put_extension (uint8_t *p, uint32_t type, const void *data, size_t n)
{
  put32 (p, type);
  put32 (p + 4, n);
  memcpy (p + 8, data, n);
  return 8 + div_round_up (n, 8) * 8;
}

/* The checkpoint's extension: the export's name, the checkpoint's,
 * its identity, the disk's size and the file's length (in decimal),
 * each but the last ended by a NUL.
 */
static size_t
put_checkpoint (uint8_t *p, const struct qcow2_checkpoint *cp)
{
  char data[EXT_SPACE];
  size_t e = strlen (cp->export), n = e + 1;

  memcpy (data, cp->export, n);
  n += snprintf (data + n, sizeof data - n, "%s%c%s%c%" PRIu64 "%c%" PRIu64,
                 cp->name, 0, cp->identity, 0, cp->disk_size, 0,
                 cp->file_length);
  return put_extension (p, EXT_CHECKPOINT, data, n);
}

/* The checksums' extension: its fields, big-endian. */
static size_t
put_sums (uint8_t *p, const struct qcow2_sums *sums)
{
  uint8_t data[SUMS_LENGTH] = { 0 };

  put64 (data, sums->offset);
  put64 (data + 8, sums->first_cluster);
  put64 (data + 16, sums->count);
  put32 (data + 24, sums->crc);
  put32 (data + 28, sums->tables_crc);
  put32 (data + SUMS_HEADER_CRC, sums->header_crc);
  put32 (data + SUMS_FLAGS, sums->flags);
  memcpy (data + 40, sums->base_identity, strlen (sums->base_identity));
  return put_extension (p, EXT_SUMS, data, sizeof data);
}

int
qcow2_write_header (const struct qcow2_layout *q, int fd, const char *out,
                    const char *backing, const char *backing_format,
                    const struct qcow2_checkpoint *cp,
                    const struct qcow2_sums *sums)
{
  /* The fields, the extensions (each padded to 8), the end of the
   * extensions, then the backing file's name.
   */
  uint8_t buf[HEADER_LENGTH + 16 + EXT_SPACE + 8 + SUMS_LENGTH + 8 +
              QCOW2_MAX_BACKING] = { 0 };
  size_t name_len = backing ? strlen (backing) : 0, at = HEADER_LENGTH;
  size_t sums_at = 0;

  if (backing && !qcow2_backing_fits (backing))
    return -1;
  put32 (buf + 0, QCOW2_MAGIC);
  put32 (buf + 4, QCOW2_VERSION);
  put32 (buf + 20, q->cluster_bits);
  put64 (buf + 24, q->virtual_size);
  put32 (buf + 36, q->l1_entries);              /* after crypt_method 0 */
  put64 (buf + 40, q->l1_offset);
  put64 (buf + 48, q->refcount_table_offset);
  put32 (buf + 56, q->refcount_table_clusters);
  /* No snapshots, and no feature bits but extended L2 entries: bytes 60
   * to 95 stay zero but for the incompatible features.
   */
  if (q->extended)
    put64 (buf + 72, QCOW2_INCOMPAT_EXTL2);
  put32 (buf + 96, REFCOUNT_ORDER);
  put32 (buf + 100, HEADER_LENGTH);
  if (backing)
    at += put_extension (buf + at, EXT_BACKING_FORMAT, backing_format,
                         strlen (backing_format));
  if (cp)
    at += put_checkpoint (buf + at, cp);
  if (sums) {
    sums_at = at + 8;
    at += put_sums (buf + at, sums);
  }
  at += 8;                      /* the end of the extensions: zeros */
  if (backing) {
    put64 (buf + 8, at);                        /* backing_file_offset */
    put32 (buf + 16, name_len);                 /* backing_file_size */
    memcpy (buf + at, backing, name_len);
  }
  if (sums) {
    put32 (buf + sums_at + SUMS_HEADER_CRC, 0);
    put32 (buf + sums_at + SUMS_HEADER_CRC,
           crc32c (0, buf, at + name_len));
  }
  return write_at (fd, out, buf, at + name_len, 0);
}

/* Copies the field of data (n bytes) at *at, ended by a NUL or the
 * data's end, into out (max bytes at most) as a string, and moves *at
 * past it.  Returns 0, or -1 if it is empty or too long.
 */
static int
get_field (const uint8_t *data, size_t n, size_t *at, char *out, size_t max)
{
  const uint8_t *end = memchr (data + *at, 0, n - *at);
  size_t len = (end ? (size_t) (end - data) : n) - *at;

  if (len > max || *at > n)
    return -1;
  memcpy (out, data + *at, len);
  out[len] = '\0';
  *at += len + (end != NULL);
  return 0;
}

/* A decimal number of the extension. */
static int
get_number (const uint8_t *data, size_t n, size_t *at, uint64_t *v)
{
  char digits[21], *end;

  if (get_field (data, n, at, digits, 20) == -1 || digits[0] < '0' ||
      digits[0] > '9')
    return -1;
  errno = 0;
  *v = strtoull (digits, &end, 10);
  return *end || errno ? -1 : 0;
}

/* Sets the struct qcow2_checkpoint into from the data of a checkpoint
 * extension of n bytes: 0, or -1 if it is not one.
 */
static int
get_checkpoint (const uint8_t *data, size_t n, void *into)
{
  struct qcow2_checkpoint *cp = into;
  size_t at = 0;

  if (get_field (data, n, &at, cp->export, QCOW2_CHECKPOINT_EXPORT_MAX) == -1 ||
      at == n ||
      get_field (data, n, &at, cp->name, CHECKPOINT_NAME_MAX) == -1 ||
      get_field (data, n, &at, cp->identity, QCOW2_IDENTITY_MAX) == -1 ||
      get_number (data, n, &at, &cp->disk_size) == -1 ||
      get_number (data, n, &at, &cp->file_length) == -1 || at != n ||
      cp->name[0] == '\0' || cp->identity[0] == '\0')
    return -1;
  return 0;
}

/* Walks the header extensions in the got bytes of buf (the start of a
 * qcow2 image of version 3) to their end: sets *end past their end
 * marker and, if there is one of type, *payload and *n to where its
 * data lies and how long it is.  Returns 1 if there is one of type, 0
 * if not, -1 if buf is no such image or its extensions are damaged.
 */
static int
walk_extensions (const uint8_t *buf, size_t got, uint32_t type,
                 size_t *payload, size_t *n, size_t *end)
{
  size_t at, len;
  int found = 0;

  if (got < HEADER_LENGTH || qcow2_be32 (buf) != QCOW2_MAGIC ||
      qcow2_be32 (buf + 4) != QCOW2_VERSION)
    return -1;
  for (at = qcow2_be32 (buf + 100); ; at += 8 + div_round_up (len, 8) * 8) {
    if (at + 8 > got)
      return -1;
    len = qcow2_be32 (buf + at + 4);
    if (qcow2_be32 (buf + at) == 0) {
      *end = at + 8;
      return found;
    }
    if (len > got - at - 8)
      return -1;
    if (qcow2_be32 (buf + at) == type && !found) {
      *payload = at + 8;
      *n = len;
      found = 1;
    }
  }
}

/* Reads the start of the qcow2 image at fd (its first cluster, at most
 * 2M, where the header lies) into a new buffer, *got bytes.  Returns
 * it, or NULL.
 */
static uint8_t *
read_start (int fd, size_t *got)
{
  enum { MAX = 1 << MAX_CLUSTER_BITS };
  uint8_t *buf = malloc (MAX);
  ssize_t r = buf ? pread (fd, buf, MAX, 0) : -1;

  if (r < 0) {
    free (buf);
    return NULL;
  }
  *got = r;
  return buf;
}

/* Calls get on the data of the header extension of type of the qcow2
 * image at fd.  Returns 1 if get returned 0, 0 if the image has no
 * such extension, or -1 if get returned -1, fd is no qcow2 image of
 * version 3 or its header extensions are damaged.
 */
static int
read_extension (int fd, uint32_t type,
                int (*get) (const uint8_t *data, size_t n, void *into),
                void *into)
{
  size_t got, payload, n, end;
  uint8_t *buf = read_start (fd, &got);
  int r = buf ? walk_extensions (buf, got, type, &payload, &n, &end) : -1;

  if (r == 1 && get (buf + payload, n, into) == -1)
    r = -1;
  free (buf);
  return r;
}

int
qcow2_header_crc (int fd, uint32_t *crc)
{
  size_t got, payload, n, end;
  uint8_t *buf = read_start (fd, &got);
  uint64_t name_end;
  int r = buf ? walk_extensions (buf, got, EXT_SUMS, &payload, &n, &end)
    : -1;

  if (r == 1 && n == SUMS_LENGTH) {
    name_end = qcow2_be64 (buf + 8) + qcow2_be32 (buf + 16);
    if (qcow2_be64 (buf + 8) && name_end > end)
      end = name_end <= got ? name_end : got;
    put32 (buf + payload + SUMS_HEADER_CRC, 0);
    *crc = crc32c (0, buf, end);
  }
  free (buf);
  return r == 1 && n == SUMS_LENGTH ? 0 : -1;
}

int
qcow2_read_checkpoint (int fd, struct qcow2_checkpoint *cp)
{
  return read_extension (fd, EXT_CHECKPOINT, get_checkpoint, cp);
}

/* Sets the struct qcow2_sums into from the data of a checksums'
 * extension of n bytes: 0, or -1 if it is not one.
 */
static int
get_sums (const uint8_t *data, size_t n, void *into)
{
  struct qcow2_sums *sums = into;

  if (n != SUMS_LENGTH)
    return -1;
  sums->offset = qcow2_be64 (data);
  sums->first_cluster = qcow2_be64 (data + 8);
  sums->count = qcow2_be64 (data + 16);
  sums->crc = qcow2_be32 (data + 24);
  sums->tables_crc = qcow2_be32 (data + 28);
  sums->header_crc = qcow2_be32 (data + SUMS_HEADER_CRC);
  sums->flags = qcow2_be32 (data + SUMS_FLAGS);
  if (memchr (data + 40, 0, QCOW2_IDENTITY_MAX + 1) == NULL)
    return -1;
  strcpy (sums->base_identity, (const char *) data + 40);
  return 0;
}

int
qcow2_read_sums (int fd, struct qcow2_sums *sums)
{
  return read_extension (fd, EXT_SUMS, get_sums, sums);
}

int
qcow2_backing_name (int fd, char *name)
{
  uint8_t buf[20];
  uint64_t offset;
  uint32_t len;

  if (pread (fd, buf, sizeof buf, 0) != sizeof buf ||
      qcow2_be32 (buf) != QCOW2_MAGIC)
    return 0;                   /* raw: no backing file */
  offset = qcow2_be64 (buf + 8);
  len = qcow2_be32 (buf + 16);
  if (offset == 0)
    return 0;
  if (len == 0 || len > QCOW2_MAX_BACKING ||
      pread (fd, name, len, offset) != (ssize_t) len)
    return -1;
  name[len] = '\0';
  return strlen (name) == len ? 1 : -1;
}
