/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Division rounding up: how many pieces of size b hold a bytes, with no
 * overflow for any a.  b must not be 0.
 */

#ifndef COMMON_DIVROUND_H
#define COMMON_DIVROUND_H

#include <stdint.h>

static inline uint64_t
div_round_up (uint64_t a, uint64_t b)
{
  return a / b + (a % b != 0);
}

#endif /* COMMON_DIVROUND_H */
