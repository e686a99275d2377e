/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* What the power-loss shims (tests/power-log.c, tests/power-dir.c)
 * share: the real call a wrapper passes on to, and the kill at the
 * persistence point COW_POWER_CUT_AT names.
 */

#ifndef TESTS_CUT_POINT_H
#define TESTS_CUT_POINT_H

#include <dlfcn.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>

/* Declares real, the next definition of name (libc's). */
#define REAL(name) \
  static __typeof__ (name) *real; \
  if (!real) \
    real = (__typeof__ (name) *) dlsym (RTLD_NEXT, #name)

/* Kills the process at the persistence point COW_POWER_CUT_AT names
 * (counted from 1), before it happens: any thread may ask.
 */
static inline void
count_point (void)
{
  static atomic_uint_fast64_t points;
  const char *at = getenv ("COW_POWER_CUT_AT");

  if (at && atomic_fetch_add (&points, 1) + 1 == strtoull (at, NULL, 10))
    raise (SIGKILL);
}

#endif /* TESTS_CUT_POINT_H */
