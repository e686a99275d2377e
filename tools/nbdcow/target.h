/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Where nbdcow commit writes: a file (or block device) opened
 * read-write, or an NBD export named by a URI (nbd://, nbd+unix://),
 * over several connections where the server allows multi-conn.  Every
 * call prints what went wrong itself, naming the target.
 */

#ifndef NBDCOW_TARGET_H
#define NBDCOW_TARGET_H

#include <stdbool.h>
#include <stdint.h>

struct target;

/* Opens name, with up to connections parallel handles (fewer if the
 * target cannot keep them consistent).  Returns NULL on failure.
 */
extern struct target *target_open (const char *name, unsigned connections);
/* The file open as fd (which the target duplicates), called name in
 * messages.
 */
extern struct target *target_open_fd (const char *name, int fd,
                                      unsigned connections);
extern void target_close (struct target *t);

extern const char *target_name (const struct target *t);
/* Whether the target is the file open as fd. */
extern bool target_is_file (const struct target *t, int fd);
extern uint64_t target_size (const struct target *t);
extern unsigned target_connections (const struct target *t);

/* Each on handle conn (< target_connections), which one thread uses at
 * a time.  Return 0 or -1.
 */
extern int target_write (struct target *t, unsigned conn, const void *buf,
                         uint64_t count, uint64_t offset);
/* Copies count bytes at in_offset of the file fd into the target at
 * offset inside the kernel (copy_file_range), where both are files.
 * Returns 0, -1 after a message, or 1 if the target or the kernel
 * cannot: then the caller reads and writes.
 */
extern int target_copy_from (struct target *t, int fd, uint64_t in_offset,
                             uint64_t count, uint64_t offset);

/* Makes the range read as zeros, deallocating it where it can. */
extern int target_zero (struct target *t, unsigned conn, uint64_t count,
                        uint64_t offset);

/* Makes every write completed on any handle durable. */
extern int target_flush (struct target *t);

#endif /* NBDCOW_TARGET_H */
