/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The file of a kept overlay (cow-file=PATH): opening and locking it,
 * creating it, loading and writing its block states, its flags, and
 * the order of a crash-safe flush (docs/overlay-format.md).  The filter
 * (blk.c) and the command-line tool (tools/nbdcow.c) both use it, so
 * there is one reader and one writer of the format.
 *
 * Nothing here knows nbdkit: a failing call returns -1 and leaves a
 * message naming the file in kf->why.  Not thread-safe: the filter
 * calls it at setup, at flush (under its flush_lock) and at close.
 */

#ifndef COW_KEPTFILE_H
#define COW_KEPTFILE_H

#include <stdbool.h>
#include <stdint.h>

#include "kept.h"
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

/* Lays out an empty file for a base of base_size bytes, export name,
 * and makes it durable with its header flagged KEPT_OPEN: sized first,
 * so a header on disk always comes with the whole file behind it.
 */
extern int keptfile_create (struct keptfile *kf, uint32_t block_size,
                            uint64_t base_size, const char *name);

/* Number of blocks of the base. */
extern uint64_t keptfile_blocks (const struct keptfile *kf);

/* Checks that the file is as long as its header says (damage if not). */
extern int keptfile_check_length (struct keptfile *kf);

/* Loads the block states into states (empty before), refusing the
 * value 3, which no state has (damage: the first such block is named).
 * With bad_blocks non-NULL, damage is counted there instead and the
 * load goes on, the bad states loaded as 3.
 */
extern int keptfile_load_states (struct keptfile *kf, struct statemap *states,
                                 uint64_t *bad_blocks);

/* Punches the data area of every block states does not hold allocated:
 * what a crash left there of unflushed writes is not part of the disk.
 * A filesystem that cannot punch holes only costs space.
 */
extern void keptfile_punch_unallocated (struct keptfile *kf,
                                        const struct statemap *states);

/* Sets *bytes to the disk space the data area takes in blocks that
 * states does not hold allocated: left by writes a crash cut off before
 * their flush, harmless, given back by keptfile_punch_unallocated.
 */
extern int keptfile_leaked_bytes (struct keptfile *kf,
                                  const struct statemap *states,
                                  uint64_t *bytes);

/* Sets the flags and the count of recoveries, and makes the header
 * durable.  Only its first 512 bytes change, so a power loss in the
 * middle leaves the old or the new header (one sector is written
 * whole).  A version 1 file becomes version 2 here.
 */
extern int keptfile_set_flags (struct keptfile *kf, uint32_t flags,
                               uint32_t recoveries);

/* A flush (docs/overlay-format.md): rounds of take, sync the data,
 * write the pages taken, sync.  take copies the states of up to max
 * dirty state pages from page *next on into buf (KEPT_STATE_PAGE bytes
 * each), their numbers into pages, marks them clean, advances *next
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
 * data area punched.  A crash in between leaves blocks in the overlay
 * or not, each reading what it read before.
 */
extern int keptfile_empty (struct keptfile *kf);

/* Reads count bytes of the disk at offset from the data area. */
extern int keptfile_read_data (struct keptfile *kf, void *buf, uint64_t count,
                               uint64_t offset);

/* The disk space the file takes, in bytes. */
extern uint64_t keptfile_bytes_on_disk (struct keptfile *kf);

#endif /* COW_KEPTFILE_H */
