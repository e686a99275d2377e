/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Powers of two: whether a number is one, and its log2. */

#ifndef COMMON_ISPOWEROF2_H
#define COMMON_ISPOWEROF2_H

#include <stdbool.h>
#include <stdint.h>

/* True if v is a power of two (and so not zero). */
static inline bool
is_power_of_2 (uint64_t v)
{
  return v != 0 && (v & (v - 1)) == 0;
}

/* log2 of a power of two. */
static inline unsigned
log_2_bits (uint64_t v)
{
  return 63 - (unsigned) __builtin_clzll (v);
}

#endif /* COMMON_ISPOWEROF2_H */
