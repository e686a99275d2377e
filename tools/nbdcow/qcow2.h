/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The qcow2 file (version 3) that nbdcow export writes with no qemu
 * running: over a raw backing file, data clusters where the overlay
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

#include <stdbool.h>
#include <stdint.h>

#include "nbdcow.h"

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

/* Lays out the file for ov. */
extern void qcow2_plan (const struct overlay_file *ov, struct qcow2_layout *q);

/* Writes the tables of q for ov into fd (the file out, sized to
 * q->clusters clusters): everything but the header, which
 * qcow2_write_header writes last, so that the file is a qcow2 file only
 * once complete.  Returns 0, or -1 after a message.
 */
extern int qcow2_write_tables (const struct qcow2_layout *q,
                               const struct overlay_file *ov, int fd,
                               const char *out);

/* Whether backing fits in the header; if not, says so. */
extern bool qcow2_backing_fits (const char *backing);

/* Writes the header naming backing (at most QCOW2_MAX_BACKING bytes),
 * a file of format backing_format ("raw" or "qcow2"), or with no
 * backing file if backing is NULL.  Returns 0, or -1 after a message.
 */
extern int qcow2_write_header (const struct qcow2_layout *q, int fd,
                               const char *out, const char *backing,
                               const char *backing_format);

/* Sets *size to the virtual size of the qcow2 image at fd and returns
 * true, or returns false if fd does not start as a qcow2 image does.
 */
extern bool qcow2_virtual_size (int fd, uint64_t *size);

#endif /* NBDCOW_QCOW2_H */
