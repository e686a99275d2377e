/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The overlay's data on disk: the one file of a kept overlay, or the
 * files of a throw-away overlay, one per stripe.  The disk is cut into
 * chunks of 2^chunk_shift bytes, and chunk c belongs to stripe
 * c mod nr_stripes, whose write lock covers it, so that writes to
 * different stripes do not wait for one lock (docs/performance.md).  Throw-away, each stripe has its own file, so
 * they meet no inode either: disk byte x lives at byte x of its
 * stripe's file, and the chunks of the other stripes are holes that
 * nothing writes.  Kept, every stripe writes the one file, disk byte x
 * at byte data_offset + x (format versions 1 and 2).
 *
 * A packed kept overlay (format version 3, overlayfile_use_slots)
 * keeps block b in a slot of its file instead, at data_offset +
 * slot * block size (keptslots.h): a block written for the first time
 * takes the lowest free slot, a block punched whole gives its slot up
 * (retired: not taken again while the file stays open).  Reads find a
 * block with no slot (one punched meanwhile) as zeros.  The file is
 * extended ahead of its slots, sparsely, 64 MiB at a time.
 *
 * Each stripe has a write lock (docs/design.md): held over every
 * system call that writes or punches in its chunks, and by the block
 * layer over the state lookups that must not race them.  A caller
 * holding the locks of a range takes them with overlayfile_lock, in
 * ascending stripe order, and nothing else is taken inside them but
 * state_lock and, packed, slot_lock.  slot_lock is held over every
 * change of the slots (taking, retiring) and the file's growth; a
 * block's slot changes only under its stripe's write lock as well.
 *
 * Reads and writes of a range touching several chunks are split at
 * chunk boundaries (packed, at runs of consecutive slots), one system
 * call or more per piece.  nbdkit_error reports each failure, naming
 * the disk offset.
 */

#ifndef COW_OVERLAYFILE_H
#define COW_OVERLAYFILE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct overlayfile_stripe {
  int fd;
  pthread_mutex_t write_lock;
};

struct keptslots;

struct overlayfile {
  unsigned nr_stripes;
  unsigned chunk_shift;         /* 63 for one stripe: nothing is split */
  uint64_t data_offset;         /* where disk byte 0 (or slot 0) is */
  /* Packed: the slots of the blocks, under the write lock but for
   * lookups (keptslots.h); NULL otherwise.
   */
  struct keptslots *slots;
  unsigned block_shift;         /* if packed */
  uint64_t sized_slots;         /* packed: slots the file's length spans */
  bool one_file;                /* kept: the stripes share the caller's fd */
  pthread_mutex_t slot_lock;    /* packed: changes of slots, growth */
  struct overlayfile_stripe *stripes;
};

/* Creates nr_stripes temporary files in tmpdir (created 0600, unlinked
 * at once, close-on-exec), chunks of 2^chunk_shift bytes.  Returns 0,
 * or -1 after nbdkit_error.
 */
extern int overlayfile_new_temp (struct overlayfile *of, const char *tmpdir,
                                 unsigned nr_stripes, unsigned chunk_shift);

/* nr_stripes stripes, chunks of 2^chunk_shift bytes, over the one file
 * fd, which stays the caller's (a kept overlay's).  Returns 0, or -1
 * after nbdkit_error.
 */
extern int overlayfile_new_fd (struct overlayfile *of, int fd,
                               unsigned nr_stripes, unsigned chunk_shift);

/* Packs the one file of overlayfile_new_fd from now on: slot s at
 * data_offset + (s << block_shift).  Before any I/O.
 */
extern void overlayfile_use_slots (struct overlayfile *of,
                                   uint64_t data_offset,
                                   struct keptslots *slots,
                                   unsigned block_shift);

extern void overlayfile_close (struct overlayfile *of);

/* The files: one for a kept overlay, one per stripe otherwise.  Stripe
 * i < overlayfile_files holds file i.
 */
extern unsigned overlayfile_files (const struct overlayfile *of);

/* Extends every file to data_offset + size bytes, sparsely.  A
 * filesystem that cannot hold that size leaves the files short, and
 * the writes beyond fail with EFBIG and a message saying why.
 */
extern void overlayfile_extend (struct overlayfile *of, uint64_t size);

/* Takes, in ascending order, the write locks of the stripes holding
 * [offset, offset+count), count > 0.  Returns the nanoseconds spent
 * waiting, 0 if none.
 */
extern uint64_t overlayfile_lock (struct overlayfile *of, uint64_t offset,
                                  uint64_t count);
extern void overlayfile_unlock (struct overlayfile *of, uint64_t offset,
                                uint64_t count);

/* pread of [offset, offset+count).  No lock.  Returns 0, or -1 with
 * *err set.
 */
extern int overlayfile_read (struct overlayfile *of, void *buf,
                             uint64_t count, uint64_t offset, int *err);

/* Writes buf, or zeros if buf is NULL, allocating space: zeros use
 * FALLOC_FL_ZERO_RANGE where the filesystem has it, which allocates
 * without writing.  No pwrite crosses a multiple of 128 KiB of its
 * file (docs/design.md says why).  Requires the write locks
 * of the range.  Returns 0, or -1 with *err set.
 */
extern int overlayfile_write_locked (struct overlayfile *of, const void *buf,
                                     uint64_t count, uint64_t offset,
                                     int *err);

/* Deallocates [offset, offset+count), which then reads as zeros,
 * under the write locks of its stripes (each file in turn, throw-away;
 * kept, the range's together) and adding the time waited for them to
 * *waited.  Packed, the range is whole blocks (the disk's
 * last one may be short), whose slots are given up.  Returns 0, or -1
 * with errno set if a file could not be punched.
 */
extern int overlayfile_punch (struct overlayfile *of, uint64_t count,
                              uint64_t offset, uint64_t *waited);

/* The disk space the files take, in bytes. */
extern uint64_t overlayfile_bytes (struct overlayfile *of);

#endif /* COW_OVERLAYFILE_H */
