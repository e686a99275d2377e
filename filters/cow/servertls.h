/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* Whether nbdkit requires TLS of every client (--tls=require).  nbdkit
 * tells a filter each connection's TLS, but not its own mode, which a
 * context opened outside any connection (basepool.h) takes on: such a
 * context sees TLS only under --tls=require.  So the mode is read from
 * nbdkit's command line, as getopt_long reads it: --tls=MODE or --tls
 * MODE, the last one winning, up to "--" or the plugin's name, from
 * the argument after the one named nbdkit (a program may run nbdkit:
 * the dynamic loader, valgrind).
 */

#ifndef COW_SERVERTLS_H
#define COW_SERVERTLS_H

#include <stdbool.h>
#include <stddef.h>

/* Whether the arguments args[0..n), each ended by a 0 byte as in
 * /proc/self/cmdline, require TLS.
 */
extern bool servertls_required_in (const char *args, size_t n);

/* Whether this nbdkit's command line requires TLS (false if it cannot
 * be read).
 */
extern bool servertls_required (void);

#endif /* COW_SERVERTLS_H */
