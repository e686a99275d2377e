/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* What the files of the kept library share and its users do not see. */

#ifndef KEPT_INTERNAL_H
#define KEPT_INTERNAL_H

#include <stdbool.h>

#include "kept.h"

/* State pages read or written per system call (and per round of a
 * flush): 1 MiB.
 */
#define PAGES_PER_IO 256

/* Sets ko->why to "PATH: " and the message, and ko->damaged, keeping
 * errno.  Returns -1.
 */
extern int kept_fail (struct kept_overlay *ko, bool damaged,
                      const char *fmt, ...)
  __attribute__ ((format (printf, 3, 4)));

#endif /* KEPT_INTERNAL_H */
