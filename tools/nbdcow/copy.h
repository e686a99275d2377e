/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Writes what an overlay holds into a target, the engine of nbdcow
 * commit and export.
 */

#ifndef NBDCOW_COPY_H
#define NBDCOW_COPY_H

#include <stdbool.h>
#include <stdint.h>

#include "nbdcow.h"
#include "target.h"

struct copy_totals {
  uint64_t data_bytes;          /* written from blocks in the overlay */
  uint64_t zero_bytes;          /* zeroed for zero blocks */
  unsigned connections;         /* to the target, in parallel */
};

/* Writes every block of ov that does not read from the base into t (of
 * the base's size): data blocks as writes, zero blocks as write
 * zeroes, in pieces spread over the target's connections, one thread
 * each, then flushes t.  Running it again after an interruption writes
 * the same bytes: the result is the same.  Returns 0, or -1 after a
 * message.
 */
extern int copy_overlay (struct overlay_file *ov, struct target *t,
                         bool progress, const char *what,
                         struct copy_totals *totals);

/* The same, but the data blocks go one after another from data_offset
 * in t (qcow2.h), in the order of their offsets, and zero blocks
 * nowhere, the target's own map saying that they read zeros.
 */
extern int copy_overlay_consecutive (struct overlay_file *ov, struct target *t,
                                     uint64_t data_offset, bool progress,
                                     const char *what,
                                     struct copy_totals *totals);

#endif /* NBDCOW_COPY_H */
