/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdkit's own options, read from its command line.  nbdkit tells a
 * filter neither its TLS mode (which a context opened outside any
 * connection, basepool.h, takes on: such a context sees TLS only under
 * --tls=require) nor the path of its Unix socket (which the control
 * socket must not take).  So they are read from /proc/self/cmdline as
 * getopt_long reads them: --NAME=VALUE, --NAME VALUE, -CVALUE, -C
 * VALUE and clusters of short options, the last one winning, up to
 * "--" or the plugin's name, from the argument after the one named
 * nbdkit (a program may run nbdkit: the dynamic loader, valgrind).
 */

#ifndef COW_NBDKITARGS_H
#define COW_NBDKITARGS_H

#include <stdbool.h>
#include <stddef.h>

/* Reads this process's command line into buf: its arguments, each
 * ended by a 0 byte.  Returns its length, 0 if it cannot be read.
 */
extern size_t nbdkitargs_read (char *buf, size_t size);

/* The value of the last of nbdkit's options --long_name or
 * -short_name in args[0..n) (as nbdkitargs_read gives them), pointing
 * into args, or NULL if there is none.
 */
extern const char *nbdkitargs_value_in (const char *args, size_t n,
                                        const char *long_name,
                                        char short_name);

/* Whether args[0..n) require TLS (--tls=require). */
extern bool nbdkitargs_tls_required_in (const char *args, size_t n);

#endif /* COW_NBDKITARGS_H */
