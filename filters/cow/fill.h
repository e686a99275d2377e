/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The background fill (cow-fill): threads that copy the base's data
 * into each overlay while clients are served, so that a slow source is
 * read once, in order, and the overlay can then stand alone.
 */

#ifndef COW_FILL_H
#define COW_FILL_H

#include <nbdkit-filter.h>

/* .after_fork: starts the threads under cow-fill, reading the plugin
 * through backend.  Returns 0, or -1 after nbdkit_error.
 */
extern int fill_start (nbdkit_backend *backend);

/* A client is connecting: for a while the fill keeps to a single small
 * request in flight, as when a client reads a base.
 */
extern void fill_client_connecting (void);

/* Stops the threads and waits for them.  Safe if it never started. */
extern void fill_stop (void);

#endif /* COW_FILL_H */
