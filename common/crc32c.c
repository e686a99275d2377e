/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* CRC-32C (crc32c.h): the SSE4.2 instruction 8 bytes at a time where
 * the CPU has it, else a table of the 256 bytes' remainders.
 */

#include <config.h>

#include <string.h>

#include "crc32c.h"

#define POLY 0x82F63B78u        /* reflected Castagnoli polynomial */

/* The remainder of each byte, made once (any thread may make it: they
 * all write the same values).
 */
static uint32_t table[256];
static int table_made;

static void
make_table (void)
{
  unsigned i, k;

  if (__atomic_load_n (&table_made, __ATOMIC_ACQUIRE))
    return;
  for (i = 0; i < 256; ++i) {
    uint32_t r = i;

    for (k = 0; k < 8; ++k)
      r = (r >> 1) ^ (POLY & -(r & 1));
    __atomic_store_n (&table[i], r, __ATOMIC_RELAXED);
  }
  __atomic_store_n (&table_made, 1, __ATOMIC_RELEASE);
}

uint32_t
crc32c_table (uint32_t crc, const void *buf, size_t size)
{
  const unsigned char *p = buf;
  size_t i;

  make_table ();
  crc = ~crc;
  for (i = 0; i < size; ++i)
    crc = __atomic_load_n (&table[(crc ^ p[i]) & 0xff], __ATOMIC_RELAXED)
          ^ (crc >> 8);
  return ~crc;
}

#if defined (__x86_64__)
__attribute__ ((target ("sse4.2")))
static uint32_t
crc32c_sse42 (uint32_t crc, const void *buf, size_t size)
{
  const unsigned char *p = buf;
  uint64_t c = ~crc & 0xffffffffu;

  for (; size >= 8; p += 8, size -= 8) {
    uint64_t word;

    memcpy (&word, p, 8);
    c = __builtin_ia32_crc32di (c, word);
  }
  for (; size > 0; ++p, --size)
    c = __builtin_ia32_crc32qi ((uint32_t) c, *p);
  return ~(uint32_t) c;
}

uint32_t
crc32c (uint32_t crc, const void *buf, size_t size)
{
  if (__builtin_cpu_supports ("sse4.2"))
    return crc32c_sse42 (crc, buf, size);
  return crc32c_table (crc, buf, size);
}
#else
uint32_t
crc32c (uint32_t crc, const void *buf, size_t size)
{
  return crc32c_table (crc, buf, size);
}
#endif
