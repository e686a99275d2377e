/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* CRC-32C (Castagnoli), the checksum of the kept overlay's header
 * (docs/overlay-format.md).  Bit by bit: it only ever runs over a few
 * KiB at open and at flush, where a table or the SSE4.2 instruction
 * would buy nothing worth their code.
 */

#ifndef COMMON_CRC32C_H
#define COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues crc (0 to start) over size bytes of buf. */
static inline uint32_t
crc32c (uint32_t crc, const void *buf, size_t size)
{
  const unsigned char *p = buf;
  size_t i;
  int k;

  crc = ~crc;
  for (i = 0; i < size; ++i) {
    crc ^= p[i];
    for (k = 0; k < 8; ++k)
      crc = (crc >> 1) ^ (0x82F63B78u & -(crc & 1));
  }
  return ~crc;
}

#endif /* COMMON_CRC32C_H */
