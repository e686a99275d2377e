/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The statistics' view of the overlays (stats.h): every overlay not
 * ending, oldest first, each pinned while it is read so that none ends
 * under the walk (registry.h), and the server's counts.
 */

#ifndef COW_GATHER_H
#define COW_GATHER_H

#include "statsrecords.h"

extern stats_gather gather_overlays;

#endif /* COW_GATHER_H */
