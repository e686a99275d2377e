/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Preloaded into nbdkit by ./nbdkit right after a sanitizer runtime,
 * and linked with -z initfirst so that its constructor runs before any
 * other: it makes the runtime start up there, through its malloc.
 *
 * Otherwise the runtime starts up on the first malloc of some other
 * library's constructor.  libp11-kit's calls newlocale, which holds
 * glibc's locale lock (as a writer) around that malloc; the runtime's
 * start-up asks dlerror, whose gettext takes and releases the same
 * lock, so newlocale's own release later finds it free and leaves its
 * reader count at -1.  The first strerror after that ("%m" in a log
 * line) turns it into a read phase no writer can ever enter, and
 * libp11-kit's destructor then waits forever in freelocale: nbdkit
 * hangs at exit, or in the fork that runs a --run command.
 */

#include <stdlib.h>

static void __attribute__ ((constructor))
wake_runtime (void)
{
  void *volatile p = malloc (1);    /* volatile: the call must happen */

  free (p);
}
