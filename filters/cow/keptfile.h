/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The file of a kept overlay (cow-file=PATH): opening and locking it,
 * creating it, loading and writing its block states, its flags, and
 * the order of a crash-safe flush (docs/overlay-format.md).  The filter
 * (blk.c) and the command-line tool (tools/nbdcow.c) both use it, so
 * there is one reader and one writer of the format.
 *
 * Nothing here knows nbdkit: a failing call returns -1 and leaves a
 * message naming the file in kf->why.  Not thread-safe: the filter
 * calls it at setup, at flush (under its flush_lock) and at close;
 * keptfile_export_page, which only reads, it calls under state_lock.
 */

#ifndef COW_KEPTFILE_H
#define COW_KEPTFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "kept.h"
#include "keptslots.h"
#include "statemap.h"

/* The states of blocks, as the state area stores them. */
enum kept_state {
  KEPT_NOT_ALLOCATED = 0,       /* reads come from the base */
  KEPT_ALLOCATED = 1,           /* the data area holds the block */
  KEPT_ZERO = 2,                /* reads as zeros */
};

enum keptfile_mode {
  KEPTFILE_READ,                /* read only, shared lock */
  KEPTFILE_WRITE,               /* read-write, exclusive lock */
  KEPTFILE_CREATE,              /* as WRITE, creating a missing file */
};

struct keptfile {
  int fd;
  char *path;
  bool has_header;              /* false: an empty file, not made yet */
  struct kept_header header;    /* if has_header */
  bool damaged;                 /* the last failure was damage, not I/O */
  char why[1024];               /* the last failure: "PATH: what" */
};

/* Opens and locks path (a shared lock to read, an exclusive one to
 * write: the filter writes, so a file it serves cannot be opened) and
 * reads its header if it is not empty.  A file that is not an overlay
 * or whose header is damaged is refused.  Returns 0, or -1 with
 * kf->why set; kf needs no keptfile_close then.
 */
extern int keptfile_open (struct keptfile *kf, const char *path,
                          enum keptfile_mode mode);

/* Closes the file, dropping the lock. */
extern void keptfile_close (struct keptfile *kf);

/* Lays out an empty file of version KEPT_VERSION for a base of
 * base_size bytes, export name, and makes it durable with its header
 * flagged KEPT_OPEN: sized first, so a header on disk always comes
 * with its whole state area (and, unpacked, data area) behind it.
 */
extern int keptfile_create (struct keptfile *kf, uint32_t block_size,
                            uint64_t base_size, const char *name);

/* Number of blocks of the base. */
extern uint64_t keptfile_blocks (const struct keptfile *kf);

/* The shortest the file can be: its header and state area, and,
 * unpacked, the whole data area.
 */
extern uint64_t keptfile_min_length (const struct keptfile *kf);

/* Checks that the file is as long as keptfile_min_length (damage if
 * not).
 */
extern int keptfile_check_length (struct keptfile *kf);

/* Loads the block states into states (empty before), and if the file
 * is packed the blocks' slots into slots (initialized here; the caller
 * frees it with keptslots_free, and only then).  Refuses a state that
 * cannot be: the value 3 unpacked; packed, a slot that another block
 * has too or whose block lies past the end of the file (damage: the
 * first such block is named).  With bad_blocks non-NULL, damage is
 * counted there instead and the load goes on, the bad blocks loaded
 * as state 3 with no slot.
 */
extern int keptfile_load_states (struct keptfile *kf, struct statemap *states,
                                 struct keptslots *slots,
                                 uint64_t *bad_blocks);

/* The bytes of state page page (KEPT_STATE_PAGE of them) as the file
 * stores them, from states and, packed, slots, into buf.
 */
extern void keptfile_export_page (const struct keptfile *kf,
                                  const struct statemap *states,
                                  const struct keptslots *slots,
                                  uint64_t page, uint8_t *buf);

/* Punches the data area where it holds no block of the overlay
 * (unpacked: every block that states does not hold allocated; packed:
 * every slot not taken, the file cut after the last one taken): what a
 * crash left there of unflushed writes is not part of the disk.  A
 * filesystem that cannot punch holes only costs space.
 */
extern void keptfile_punch_unallocated (struct keptfile *kf,
                                        const struct statemap *states,
                                        const struct keptslots *slots);

/* Packed: cuts the file after its last slot taken, past which the
 * filter extends it ahead of its writes.  Unpacked: does nothing.
 */
extern void keptfile_cut (struct keptfile *kf,
                          const struct keptslots *slots);

/* Sets *bytes to the disk space the data area takes where it holds no
 * block of the overlay: left by writes a crash cut off before their
 * flush, harmless, given back by keptfile_punch_unallocated.
 */
extern int keptfile_leaked_bytes (struct keptfile *kf,
                                  const struct statemap *states,
                                  const struct keptslots *slots,
                                  uint64_t *bytes);

/* Where the data of allocated blocks [b, b+n) is: sets *at to the file
 * offset of block b's and returns how many of the blocks from b on lie
 * one after another there (at least 1, or 0 if b has no slot).
 */
extern uint64_t keptfile_data_run (const struct keptfile *kf,
                                   const struct keptslots *slots,
                                   uint64_t b, uint64_t n, uint64_t *at);

/* Sets the flags and the count of recoveries, and makes the header
 * durable.  Only its first 512 bytes change, so a power loss in the
 * middle leaves the old or the new header (one sector is written
 * whole).  A version 1 file becomes version 2 here; the others keep
 * their version.
 */
extern int keptfile_set_flags (struct keptfile *kf, uint32_t flags,
                               uint32_t recoveries);

/* A flush (docs/overlay-format.md): rounds of take, sync the data,
 * write the pages taken, sync.  take copies up to max dirty state
 * pages from page *next on into buf (KEPT_STATE_PAGE bytes each, as
 * keptfile_export_page makes them), their numbers into pages, marks them clean, advances *next
 * and returns how many; redirty marks them dirty again after a failed
 * round.  The caller takes whatever lock protects the states inside
 * those two.  On failure errno is set too.
 */
typedef unsigned keptfile_take_pages (void *opaque, uint64_t *next,
                                      uint64_t *pages, uint8_t *buf,
                                      unsigned max);
typedef void keptfile_redirty_pages (void *opaque, const uint64_t *pages,
                                     unsigned n);
extern int keptfile_flush (struct keptfile *kf, keptfile_take_pages *take,
                           keptfile_redirty_pages *redirty, void *opaque);

/* Makes the overlay empty: every state not allocated, durable, then the
 * data area punched (packed: cut off).  A crash in between leaves
 * blocks in the overlay or not, each reading what it read before.
 */
extern int keptfile_empty (struct keptfile *kf);

/* The disk space the file takes, in bytes. */
extern uint64_t keptfile_bytes_on_disk (struct keptfile *kf);

#endif /* COW_KEPTFILE_H */
