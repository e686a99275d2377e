/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* CRC-32C (Castagnoli), the checksum of the kept overlay's header,
 * table and log (docs/overlay-format.md).  A record of the log checks
 * the data it names, up to MiBs a flush, so it runs on the CPU's
 * instruction where there is one (x86-64's SSE4.2), else a byte at a
 * time from a table.
 */

#ifndef COMMON_CRC32C_H
#define COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues crc (0 to start) over size bytes of buf. */
extern uint32_t crc32c (uint32_t crc, const void *buf, size_t size);

/* The same from the table alone, whatever the CPU: for the test. */
extern uint32_t crc32c_table (uint32_t crc, const void *buf, size_t size);

#endif /* COMMON_CRC32C_H */
