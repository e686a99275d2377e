/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* What the files of the kept library share and its users do not see. */

#ifndef KEPT_INTERNAL_H
#define KEPT_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* The format's integers: little-endian, bytes bytes (at most 8) at p. */
static inline void
kept_put_le (uint8_t *p, uint64_t v, unsigned bytes)
{
  unsigned i;

  for (i = 0; i < bytes; ++i)
    p[i] = (uint8_t) (v >> (8 * i));
}

static inline uint64_t
kept_get_le (const uint8_t *p, unsigned bytes)
{
  uint64_t v = 0;
  unsigned i;

  for (i = 0; i < bytes; ++i)
    v |= (uint64_t) p[i] << (8 * i);
  return v;
}

/* The end, in the file, of block b's data in slot slot (packed). */
static inline uint64_t
kept_slot_end (const struct kept_layout *l, uint64_t b, uint64_t slot)
{
  return l->data_offset + blockgeom_start (&l->geom, slot)
         + blockgeom_end (&l->geom, b) - blockgeom_start (&l->geom, b);
}

/* The CRC-32C of the size bytes at buf with the 4 bytes at crc_at
 * (where the checksum is kept) taken as zero.
 */
extern uint32_t kept_crc_without (const uint8_t *buf, size_t size,
                                  size_t crc_at);

/* Reads the area of length bytes at offset of the file in chunks of
 * PAGES_PER_IO pages, and calls fn (ko, buf, at, len, opaque) for each
 * chunk holding a byte that is not zero, at its offset in the area.
 * Stops at the first that returns -1 (after kept_fail), and returns
 * -1; what names the area in a failed read's message.
 */
typedef int kept_chunk_fn (struct kept_overlay *ko, const uint8_t *buf,
                           uint64_t at, uint64_t len, void *opaque);
extern int kept_read_area (struct kept_overlay *ko, uint64_t offset,
                           uint64_t length, const char *what,
                           kept_chunk_fn *fn, void *opaque);

/* Writes zeros over the pages of [offset, offset+length) that are not
 * zero, without a sync: a sparse area stays sparse.  what names the
 * area in a failed read's message.
 */
extern int kept_zero_area (struct kept_overlay *ko, uint64_t offset,
                           uint64_t length, const char *what);

/* Replaying the log (log.c, states.c): an entry of a record kept as
 * block b's, checked as kept_load_states checks a state page's (0; 1
 * if bad and counted in damage, the block then holding nothing; -1
 * after kept_fail).
 */
extern int kept_load_logged (struct kept_overlay *ko, struct statemap *states,
                             const struct kept_log_entry *e,
                             uint64_t file_length, struct kept_damage *damage);

/* Version 7: log is the empty log of a new file. */
extern void kept_log_start (struct kept_log *log);

/* Frees what the load of the log found (blocks, marks). */
extern void kept_log_free (struct kept_log *log);

/* Version 7: reads the log, before the state pages: its records, the
 * last only if the data it names is durable, set ko->log, whose
 * blocks (ascending) the state pages' entries are not loaded for, and
 * *last, the entry of each (malloc'd, the caller's to free).  Returns
 * 0, or -1 after kept_fail.
 */
extern int kept_log_read (struct kept_overlay *ko, uint64_t file_length,
                          struct kept_log_entry **last);

/* Version 7: keeps the entries last of kept_log_read as their blocks'
 * in the states loaded from the pages.  Returns 0, or -1 after
 * kept_fail.
 */
extern int kept_log_apply (struct kept_overlay *ko, struct statemap *states,
                           const struct kept_log_entry *last,
                           uint64_t file_length, struct kept_damage *damage);

#endif /* KEPT_INTERNAL_H */
