/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A preloaded shim for nbdcow (LD_PRELOAD=.../no-tmpfile.so nbdcow ...):
 * open(2) with O_TMPFILE fails with EOPNOTSUPP, as it does on a
 * filesystem that has no nameless files, so that tests reach the way
 * nbdcow export writes there.
 */

#define _GNU_SOURCE 1
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/types.h>

typedef int (*open_fn) (const char *, int, ...);

/* The open named sym of the next library, but never with O_TMPFILE. */
static int
open_but_tmpfile (const char *sym, open_fn *real, const char *path,
                  int flags, mode_t mode)
{
  if ((flags & O_TMPFILE) == O_TMPFILE) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (*real == NULL)
    *real = (open_fn) dlsym (RTLD_NEXT, sym);
  return (*real) (path, flags, mode);
}

/* open and open64 as name: the mode argument is there only with
 * O_CREAT (O_TMPFILE never gets as far as the real call).
 */
#define OPEN_BUT_TMPFILE(name)                                  \
  int                                                           \
  name (const char *path, int flags, ...)                       \
  {                                                             \
    static open_fn real;                                        \
    mode_t mode = 0;                                            \
    va_list ap;                                                 \
                                                                \
    va_start (ap, flags);                                       \
    if (flags & O_CREAT)                                        \
      mode = va_arg (ap, mode_t);                               \
    va_end (ap);                                                \
    return open_but_tmpfile (#name, &real, path, flags, mode);  \
  }

OPEN_BUT_TMPFILE (open)
OPEN_BUT_TMPFILE (open64)
