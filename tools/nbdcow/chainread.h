/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The disk that a backing chain of qcow2 files holds (nbdcow backup's
 * --base=PREV and the files behind it, as qemu follows them), read a
 * cluster at a time: an increment compares its clusters with it.  It
 * reads the qcow2 files nbdcow writes: version 3, compressed clusters
 * (zlib's) or not, with no encryption, external data file or extended
 * L2 entries, and one cluster size along the chain.
 */

#ifndef NBDCOW_CHAINREAD_H
#define NBDCOW_CHAINREAD_H

#include <stdint.h>

#include "outfile.h"

/* The most files a chain may have (more is taken for a loop). */
#define CHAIN_MAX 1024

struct qcow2_chain {
  unsigned files;
  unsigned cluster_bits;
  struct chain_file *file;      /* PREV first */
};

/* Opens the chain from base, as open_backing opens it (from out,
 * named so in messages).  Returns 1, or 0 if a file of it is of a kind
 * this reader does not read (then it holds nothing open), or -1 after
 * a message.
 */
extern int qcow2_chain_open (struct qcow2_chain *c, const char *base,
                             const char *out, enum backing_named named);

/* Reads the len bytes at offset into buf: each cluster's from the
 * first file of the chain that maps it, zeros where none does.
 * Returns 0, or -1 after a message.
 */
extern int qcow2_chain_read (const struct qcow2_chain *c, void *buf,
                             uint32_t len, uint64_t offset);

/* The state of the cluster at offset, as the first file of the chain
 * that maps it has it: KEPT_ALLOCATED (data), KEPT_ZERO, or
 * KEPT_NOT_ALLOCATED where none does (it reads zeros).  Returns -1
 * after a message.
 */
extern int qcow2_chain_state (const struct qcow2_chain *c, uint64_t offset);

/* The path of file i of the chain (0: the one it was opened from). */
extern const char *qcow2_chain_path (const struct qcow2_chain *c, unsigned i);

extern void qcow2_chain_close (struct qcow2_chain *c);

#endif /* NBDCOW_CHAINREAD_H */
