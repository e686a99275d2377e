/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* What nbdkit does not tell a filter, and how the filter makes up for
 * it, each gap with the nbdkit that closes it.  The third gap, the
 * exit status nbdkit gives no filter a say in, is exitstatus.h's.
 *
 * - The export name of a context opened for sharing, outside any
 *   connection (basepool.h): nbdkit tells the plugin it from 1.43.9
 *   on, and the filter then uses it; before, the plugin is told none,
 *   so such a context reaches only the plugin's default export, and
 *   none at all of a plugin given dir= (the file and ondemand
 *   plugins' exports by name), which the filter learns by watching the
 *   parameters passed to the plugin.
 * - nbdkit's TLS mode and the path of its Unix socket: a context
 *   opened outside a connection sees TLS only under --tls=require, and
 *   the control socket must not take nbdkit's path.  No nbdkit up to
 *   1.45.2 tells a filter either, so they are read from nbdkit's
 *   command line (nbdkitargs.h).
 */

#ifndef COW_NBDKITGAPS_H
#define COW_NBDKITGAPS_H

#include <stdbool.h>

#include <nbdkit-filter.h>

/* Whether nbdkit tells the plugin the export name of a context opened
 * for sharing (from 1.43.9 on).
 */
#define SHARED_KNOWS_NAME \
  (NBDKIT_VERSION_MAJOR > 1 || \
   (NBDKIT_VERSION_MAJOR == 1 && NBDKIT_VERSION_MINOR > 43) || \
   (NBDKIT_VERSION_MAJOR == 1 && NBDKIT_VERSION_MINOR == 43 && \
    NBDKIT_VERSION_MICRO >= 9))

/* .config: notes a parameter passed on to the plugin. */
extern void nbdkitgaps_note_plugin_key (const char *key);

/* Whether a context opened for sharing reaches export exportname of
 * the plugin ("" the default).
 */
extern bool nbdkitgaps_shared_reaches (const char *exportname);

/* Whether a context opened for sharing reaches no export at all: the
 * plugin, given dir=, needs a name nbdkit does not tell it.
 */
extern bool nbdkitgaps_shared_reaches_none (void);

/* .get_ready: reads nbdkit's options from its command line. */
extern void nbdkitgaps_read_options (void);

/* Whether a context opened for sharing sees TLS (--tls=require). */
extern bool nbdkitgaps_shared_sees_tls (void);

/* The path of nbdkit's Unix socket (-U), or NULL. */
extern const char *nbdkitgaps_unix_socket (void);

#endif /* COW_NBDKITGAPS_H */
