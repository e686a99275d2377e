/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The layout and the header of a kept overlay file (cow-file=PATH).
 * docs/overlay-format.md is the specification; this is its code.
 * Pure functions of bytes: the file I/O is keptfile.c's.
 */

#ifndef COW_KEPT_H
#define COW_KEPT_H

#include <stdbool.h>
#include <stdint.h>

#define KEPT_HEADER_SIZE 8192
#define KEPT_NAME_MAX 4096      /* the longest NBD export name */
#define KEPT_STATE_PAGE 4096    /* the state area is written in pages */

/* The format version of new files; versions 1 and 2 are read and
 * written too.  Version 3 packs the data (a slot per block, its number
 * in the block's entry of the state area), versions 1 and 2 store
 * block b at its own offset (2 bits of state per block).
 */
#define KEPT_VERSION 3
#define KEPT_PACKED_VERSION 3   /* the first packed version */

/* Flags of the header (version 2). */
#define KEPT_OPEN 1             /* a writer has it open: not closed cleanly */

struct kept_layout {
  uint32_t block_size;
  uint64_t base_size;
  bool packed;                  /* version 3: slots; else block b at b */
  uint64_t blocks_per_page;     /* blocks whose states a page holds */
  uint64_t states_offset;       /* the state area */
  uint64_t states_length;       /* a whole number of state pages */
  uint64_t data_offset;         /* block 0, or slot 0 if packed */
};

/* The entries of a packed state area (little-endian uint32): */
#define KEPT_ENTRY_BASE 0       /* not allocated: reads the base */
#define KEPT_ENTRY_ZERO 1       /* reads as zeros */
#define KEPT_ENTRY_SLOT 2       /* and up: allocated, in slot entry - 2 */
#define KEPT_SLOTS_MAX (UINT64_C (0xffffffff) - KEPT_ENTRY_SLOT + 1)

/* A decoded header.  Version 1 files have no flags and no count of
 * recoveries: both read as 0.
 */
struct kept_header {
  struct kept_layout layout;
  uint32_t version;             /* 1, 2 or 3 */
  uint32_t flags;               /* KEPT_OPEN */
  uint32_t recoveries;          /* times opened after a crash */
  char name[KEPT_NAME_MAX + 1]; /* the export, NUL terminated */
};

/* The layout of a file of this version, block size and base size. */
extern void kept_layout (uint32_t version, uint32_t block_size,
                         uint64_t base_size, struct kept_layout *layout);

/* Fills buf (KEPT_HEADER_SIZE bytes) with header, as its version.  The
 * name is at most KEPT_NAME_MAX bytes.
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
