/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* How long to wait before trying again something that failed: first
 * after the first failure, twice as long after each next one, but
 * never longer than first doubled most times, however many failed.
 * The caller picks first and most so that first << most fits.
 */

#ifndef COMMON_BACKOFF_H
#define COMMON_BACKOFF_H

#include <stdint.h>

/* The wait after failures tries (1 for the first failure). */
static inline uint64_t
backoff_delay (uint64_t first, unsigned failures, unsigned most)
{
  unsigned doublings = failures > 0 ? failures - 1 : 0;

  return first << (doublings < most ? doublings : most);
}

#endif /* COMMON_BACKOFF_H */
