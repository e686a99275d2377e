/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The qcow2 file (version 3) that nbdcow export and backup write with
 * no qemu running: over a backing file, data clusters where the disk
 * has data, zero clusters where it has zero blocks, nothing elsewhere.
 *
 * The file is a row of clusters, each used once:
 *   the header (with the backing file's format and name),
 *   the refcount table, the refcount blocks,
 *   the L1 table, the L2 tables of the ranges the overlay touches,
 *   the overlay's data blocks, one after another in the order of
 *   their offsets.
 * So every refcount is 1, every L1 and L2 entry carries the COPIED
 * flag, and a data block's place in the file is its rank among the
 * data blocks times the block size.  Clusters are the overlay's block
 * size, or 2M (qcow2's largest) for larger blocks.
 */

#ifndef NBDCOW_QCOW2_H
#define NBDCOW_QCOW2_H

#include <endian.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "checkpoint.h"
#include "nbdcow.h"

/* The format's numbers that nbdcow reads and writes
 * (docs/interop/qcow2.txt in qemu): version 3; the flags of an L1 or
 * L2 entry, and the mask of its offset; and the incompatible features
 * it knows.
 */
#define QCOW2_MAGIC 0x514649fbU
#define QCOW2_VERSION 3
#define QCOW2_OFLAG_COPIED (UINT64_C (1) << 63)  /* refcount exactly 1 */
#define QCOW2_OFLAG_COMPRESSED (UINT64_C (1) << 62)
#define QCOW2_OFLAG_ZERO UINT64_C (1)       /* L2: the cluster reads zeros */
#define QCOW2_OFFSET_MASK UINT64_C (0x00fffffffffffe00)
#define QCOW2_INCOMPAT_EXTL2 (UINT64_C (1) << 4)  /* extended L2 entries */

/* A big-endian field of the format at p. */
static inline uint32_t
qcow2_be32 (const uint8_t *p)
{
  uint32_t v;

  memcpy (&v, p, 4);
  return be32toh (v);
}

static inline uint64_t
qcow2_be64 (const uint8_t *p)
{
  uint64_t v;

  memcpy (&v, p, 8);
  return be64toh (v);
}

/* qemu's longest backing file name, and its largest L1 table (32M). */
#define QCOW2_MAX_BACKING 1023
#define QCOW2_MAX_L1_ENTRIES (4 * 1024 * 1024)

struct qcow2_layout {
  unsigned cluster_bits;
  bool extended;                /* extended L2 entries: the overlay holds
                                   blocks in part, in subclusters */
  uint64_t virtual_size;        /* the base's size, in whole sectors */
  uint64_t l1_entries;
  uint64_t l2_tables;           /* L2 tables in the file */
  uint64_t data_clusters;
  uint64_t refcount_table_offset, refcount_table_clusters;
  uint64_t refcount_blocks_offset, refcount_blocks;
  uint64_t l1_offset, l1_clusters;
  uint64_t l2_offset;           /* the first L2 table */
  uint64_t data_offset;         /* the first data block */
  uint64_t clusters;            /* in the whole file */
};

/* Data clusters packed, most of them compressed (nbdcow backup
 * --compress), one after another from the first data cluster, each
 * uncompressed one on a cluster of its own: the L2 entry of each data
 * cluster by its rank among them in the disk's order, and the refcount
 * of each cluster of the file from the first data cluster on, of the
 * clusters the data takes.
 */
struct qcow2_packed {
  uint64_t *entries;
  uint16_t *refcounts;
  uint64_t clusters;
};

/* The L2 entry of a compressed cluster of the layout q, of n bytes at
 * offset, and the bytes that a reader reads for it from offset (to
 * the end of its last 512-byte sector).
 */
extern uint64_t qcow2_compressed_entry (const struct qcow2_layout *q,
                                        uint64_t offset, uint64_t n);
extern void qcow2_compressed_place (unsigned cluster_bits, uint64_t entry,
                                    uint64_t *offset, uint64_t *bytes);

/* Reads the compressed cluster of L2 entry entry from fd, of clusters
 * of 2^cluster_bits bytes, and inflates it into cluster.  Returns 0; 1
 * if its bytes do not inflate to a cluster; -1 with errno set if it
 * cannot read them.
 */
extern int qcow2_read_compressed (int fd, unsigned cluster_bits,
                                  uint64_t entry, void *cluster);

/* What the file maps: a disk in blocks, each in a kept state (kept.h):
 * in the file (KEPT_ALLOCATED, or KEPT_PARTIAL with the sub-blocks of
 * 2^part_shift bytes parts says), zero, or left to the backing file.
 * each_block_run calls fn on its runs of blocks as
 * overlay_file_each_block_run does.
 */
struct qcow2_source {
  const struct blockgeom *geom;
  unsigned part_shift;          /* 0: no block is held in part */
  int (*each_block_run) (const void *disk, overlay_run_fn *fn, void *opaque);
  uint32_t (*parts) (const void *disk, uint64_t b);
  const void *disk;
  const struct qcow2_packed *packed;  /* or NULL: one after another */
};

/* The source of an overlay file's export. */
extern struct qcow2_source qcow2_overlay_source (const struct overlay_file *ov);

/* Lays out the file for src. */
extern void qcow2_plan (const struct qcow2_source *src,
                        struct qcow2_layout *q);

/* Writes the tables of q for src into fd (the file out, sized to
 * q->clusters clusters, fewer once src's data is packed):
 * everything but the header, which
 * qcow2_write_header writes last, so that the file is a qcow2 file only
 * once complete.  Returns 0, or -1 after a message.
 */
extern int qcow2_write_tables (const struct qcow2_layout *q,
                               const struct qcow2_source *src, int fd,
                               const char *out);

/* Whether backing fits in the header; if not, says so. */
extern bool qcow2_backing_fits (const char *backing);

/* The checkpoint a backup's qcow2 file holds the disk at (nbdcow
 * backup), in a header extension of its own, which qemu keeps and
 * otherwise ignores: the export and the checkpoint, by name and by the
 * identity the server gave it (the control socket's identify), the
 * disk's size in bytes, and the file's own length once written.
 */
#define QCOW2_CHECKPOINT_EXPORT_MAX 4096
#define QCOW2_IDENTITY_MAX 63
struct qcow2_checkpoint {
  char export[QCOW2_CHECKPOINT_EXPORT_MAX + 1];
  char name[CHECKPOINT_NAME_MAX + 1];
  char identity[QCOW2_IDENTITY_MAX + 1];
  uint64_t disk_size;
  uint64_t file_length;
};

/* The checksums a backup's file holds of its data clusters (nbdcow
 * backup verify), in a header extension of its own: the table's
 * offset in the file (past every cluster of the layout, so qemu sees
 * free space there), the file's cluster of the first data cluster and
 * how many there are, and the table's own CRC-32C.  The table holds,
 * for each data cluster in the order of the disk's offsets (the order
 * they lie in the file, unless packed), the CRC-32C (big-endian) of
 * the bytes of the disk it maps (a cluster, or less at the disk's
 * end).  tables_crc is the CRC-32C of the file's tables,
 * from its second cluster to its first data cluster (refcounts, L1,
 * L2); header_crc that of its header (qcow2_header_crc);
 * base_identity the identity of the checkpoint of the backup the file
 * was made over (its backing file's record), empty for a full backup;
 * flags, QCOW2_SUMS_PACKED if the data is packed (struct
 * qcow2_packed).
 */
#define QCOW2_SUMS_PACKED 1U
struct qcow2_sums {
  uint64_t offset;
  uint64_t first_cluster;
  uint64_t count;
  uint32_t crc;
  uint32_t tables_crc;
  uint32_t header_crc;
  uint32_t flags;
  char base_identity[QCOW2_IDENTITY_MAX + 1];
};

/* Writes the header naming backing (at most QCOW2_MAX_BACKING bytes),
 * a file of format backing_format ("raw" or "qcow2"), or with no
 * backing file if backing is NULL; the checkpoint cp and the checksums
 * sums, each if not NULL.  Returns 0, or -1 after a message.
 */
extern int qcow2_write_header (const struct qcow2_layout *q, int fd,
                               const char *out, const char *backing,
                               const char *backing_format,
                               const struct qcow2_checkpoint *cp,
                               const struct qcow2_sums *sums);

/* Sets *crc to the CRC-32C of the header of the qcow2 image at fd: its
 * fields, its extensions (the checksums' with its header_crc as zero)
 * and its backing file's name.  Returns 0, or -1 if fd is no qcow2
 * image or its header extensions are damaged.
 */
extern int qcow2_header_crc (int fd, uint32_t *crc);

/* Reads the checksums' extension of the qcow2 image at fd into sums.
 * Returns 1, 0 if the image has none, or -1 if fd is no qcow2 image
 * of version 3 or its header extensions are damaged.
 */
extern int qcow2_read_sums (int fd, struct qcow2_sums *sums);

/* Reads the checkpoint of the qcow2 image at fd into cp.  Returns 1,
 * 0 if the image has none, or -1 if fd is no qcow2 image of version 3
 * or its header extensions are damaged.
 */
extern int qcow2_read_checkpoint (int fd, struct qcow2_checkpoint *cp);

/* Reads the name of the backing file of the qcow2 image at fd into
 * name (QCOW2_MAX_BACKING + 1 bytes).  Returns 1, 0 if it has none (or
 * fd is no qcow2 image), or -1 if the name is damaged.
 */
extern int qcow2_backing_name (int fd, char *name);

/* Sets *size to the virtual size of the qcow2 image at fd and returns
 * true, or returns false if fd does not start as a qcow2 image does.
 */
extern bool qcow2_virtual_size (int fd, uint64_t *size);

#endif /* NBDCOW_QCOW2_H */
