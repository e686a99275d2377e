/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* What nbdcow commit and export share. */

#ifndef NBDCOW_COMMIT_H
#define NBDCOW_COMMIT_H

#include <stdbool.h>

#include "copy.h"
#include "nbdcow.h"

#define DEFAULT_CONNECTIONS 4
#define MAX_CONNECTIONS 64

/* --connections=N.  Returns 0, or -1 after a message. */
extern int parse_connections (const char *arg, unsigned *connections);

/* Opens the target named target_name, checks that it has the base's
 * size, and copies the overlay into it (copy_overlay).  Returns 0, or
 * -1 after a message.
 */
extern int commit_into (struct overlay_file *ov, const char *target_name,
                        unsigned connections, bool progress,
                        const char *what, struct copy_totals *totals);

#endif /* NBDCOW_COMMIT_H */
