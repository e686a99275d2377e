/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* What nbdcow backup copies: a point-in-time view read over NBD (or
 * its changes since a checkpoint) into a qcow2 file (qcow2.h), mapped
 * in clusters of 64K, each in the file, zero, or (for an increment)
 * left to the backing file; and what its prune copies: the disk a
 * chain of backups holds, into one file.
 */

#ifndef NBDCOW_VIEWCOPY_H
#define NBDCOW_VIEWCOPY_H

#include <stdbool.h>
#include <stdint.h>

#include <libnbd.h>

#include "chainread.h"
#include "checks.h"
#include "nbdcow.h"
#include "progress.h"
#include "qcow2.h"

/* The clusters of the file, and the grain at which the view is mapped. */
#define CLUSTER_BITS 16

struct view_copy {
  /* Set by the caller: */
  struct nbd_handle **nbd;      /* handles on the export read, which
                                   asked for block status */
  unsigned handles;
  const char *what;             /* the export read, in messages */
  const char *out;              /* the file, in messages */
  int fd;                       /* the file, empty */
  bool increment;               /* a hole without the zero flag is
                                   unchanged: left to the backing file */
  const struct qcow2_chain *prev;  /* an increment's backing chain, or
                                      NULL: a changed cluster that reads
                                      as it does is left to it */
  const char *base_identity;    /* an increment's: its backing file's
                                   checkpoint identity (qcow2_sums) */
  const struct qcow2_chain *from;  /* or the disk a chain holds is
                                      copied, not an export (nbd NULL,
                                      handles: threads reading it) */
  bool compress;                /* --compress: the data packed
                                   (qcow2_packed), most clusters
                                   compressed */
  bool progress;                /* --progress */
  bool (*stopped) (void *opaque);  /* whether to stop (a signal came) */
  void *opaque;

  /* Made: */
  struct blockgeom geom;        /* clusters over the disk */
  struct statemap states;       /* each cluster's, kept.h's states */
  struct qcow2_layout q;
  uint64_t data_bytes, zero_bytes;
  uint32_t *sums;               /* each data cluster's CRC-32C, big-endian,
                                   by its rank among them in the disk */
  struct qcow2_packed packed;   /* with compress */
  struct progress bar;

  /* The workers': under lock. */
  mutex_t lock;
  uint64_t next_cluster FIELD_GUARDED_BY (lock);  /* the cursor */
  /* where the next data cluster goes, were none packed */
  uint64_t next_data FIELD_GUARDED_BY (lock);
  /* where the next packed one goes */
  uint64_t next_packed FIELD_GUARDED_BY (lock);
  bool failed FIELD_GUARDED_BY (lock);
  _Atomic unsigned finished;
};

/* Maps the disk of size bytes by the block status of vc->nbd[0], and
 * with vc->prev leaves to it the data clusters that read alike (read
 * on vc->nbd[0]).  Returns 0, or -1 after a message.
 */
extern int view_copy_map (struct view_copy *vc, uint64_t size);

/* Maps the disk of size bytes that vc->from holds, each cluster as its
 * chain has it.  Returns 0, or -1 after a message.
 */
extern int view_copy_map_chain (struct view_copy *vc, uint64_t size);

/* Writes the file: its tables, the data read on every handle and the
 * table of its checksums (struct qcow2_sums), flushed, then its header
 * naming backing (a qcow2 file) if not NULL, the checkpoint cp (whose
 * disk size and file length it sets) and the checksums, flushed: a
 * qcow2 file only once all it maps is durable.  Returns 0, or -1 after
 * a message.
 */
extern int view_copy_write (struct view_copy *vc, const char *backing,
                            struct qcow2_checkpoint *cp);

extern void view_copy_free (struct view_copy *vc);

#endif /* NBDCOW_VIEWCOPY_H */
