/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The layout and the header of a kept overlay file (cow-file=PATH).
 * docs/overlay-format.md is the specification; this is its code.
 * Pure functions of bytes: the file I/O is blk.c's.
 */

#ifndef COW_KEPT_H
#define COW_KEPT_H

#include <stdint.h>

#define KEPT_HEADER_SIZE 8192
#define KEPT_NAME_MAX 4096      /* the longest NBD export name */
#define KEPT_STATE_PAGE 4096    /* the state area is written in pages */
#define KEPT_BLOCKS_PER_PAGE (KEPT_STATE_PAGE * 4)

struct kept_layout {
  uint32_t block_size;
  uint64_t base_size;
  uint64_t states_offset;       /* the state area: 2 bits per block */
  uint64_t states_length;       /* a whole number of state pages */
  uint64_t data_offset;         /* block 0; the file ends at data + base */
};

/* The layout of a new file for this block size and base size. */
extern void kept_layout (uint32_t block_size, uint64_t base_size,
                         struct kept_layout *layout);

/* Fills buf (KEPT_HEADER_SIZE bytes) with the header of layout for
 * export name (at most KEPT_NAME_MAX bytes).
 */
extern void kept_header_encode (const struct kept_layout *layout,
                                const char *name, uint8_t *buf);

/* Checks buf (KEPT_HEADER_SIZE bytes) and fills layout and name (NUL
 * terminated, KEPT_NAME_MAX + 1 bytes).  Returns NULL if buf is a
 * sound header, else why not, for an error message.
 */
extern const char *kept_header_decode (const uint8_t *buf,
                                       struct kept_layout *layout,
                                       char *name);

#endif /* COW_KEPT_H */
