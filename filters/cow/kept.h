/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The layout and the header of a kept overlay file (cow-file=PATH).
 * docs/overlay-format.md is the specification; this is its code.
 * Pure functions of bytes: the file I/O is keptfile.c's.
 */

#ifndef COW_KEPT_H
#define COW_KEPT_H

#include <stdint.h>

#define KEPT_HEADER_SIZE 8192
#define KEPT_NAME_MAX 4096      /* the longest NBD export name */
#define KEPT_STATE_PAGE 4096    /* the state area is written in pages */
#define KEPT_BLOCKS_PER_PAGE (KEPT_STATE_PAGE * 4)

/* The format version written; version 1 files are read too. */
#define KEPT_VERSION 2

/* Flags of the header (version 2). */
#define KEPT_OPEN 1             /* a writer has it open: not closed cleanly */

struct kept_layout {
  uint32_t block_size;
  uint64_t base_size;
  uint64_t states_offset;       /* the state area: 2 bits per block */
  uint64_t states_length;       /* a whole number of state pages */
  uint64_t data_offset;         /* block 0; the file ends at data + base */
};

/* A decoded header.  Version 1 files have no flags and no count of
 * recoveries: both read as 0.
 */
struct kept_header {
  struct kept_layout layout;
  uint32_t version;             /* as read: 1 or 2 */
  uint32_t flags;               /* KEPT_OPEN */
  uint32_t recoveries;          /* times opened after a crash */
  char name[KEPT_NAME_MAX + 1]; /* the export, NUL terminated */
};

/* The layout of a new file for this block size and base size. */
extern void kept_layout (uint32_t block_size, uint64_t base_size,
                         struct kept_layout *layout);

/* Fills buf (KEPT_HEADER_SIZE bytes) with header, written as version
 * KEPT_VERSION whatever header->version says.  The name is at most
 * KEPT_NAME_MAX bytes.
 */
extern void kept_header_encode (const struct kept_header *header,
                                uint8_t *buf);

/* Why kept_header_decode refuses a header. */
enum kept_bad {
  KEPT_SOUND = 0,
  KEPT_FOREIGN,                 /* not an overlay, or a future version */
  KEPT_DAMAGED,                 /* an overlay whose header is damaged */
};

/* Checks buf (KEPT_HEADER_SIZE bytes) and fills header.  Returns
 * KEPT_SOUND, or what is wrong with *why saying it for a message.
 */
extern enum kept_bad kept_header_decode (const uint8_t *buf,
                                         struct kept_header *header,
                                         const char **why);

#endif /* COW_KEPT_H */
