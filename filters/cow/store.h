/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The overlay's store: where the data of allocated blocks lives.  Two
 * stores sit behind this one interface, as dm-snapshot keeps its
 * transient and persistent exception stores:
 *
 *   store-temp.c  throw-away: slots of the temporary files all
 *                 throw-away overlays share (tempfiles.h), one file
 *                 per stripe, taken by the chunks of the disk as they
 *                 are first written;
 *   store-kept.c  kept (cow-file=PATH): one file in the kept format
 *                 (kept/kept.h), crash-safe once flushed, which keeps
 *                 its own copy of the block states it writes there.
 *
 * The block layer calls only these.  It decides the states of blocks
 * and tells a store that keeps them; a store keeps its bytes and what
 * it writes of them, under its own locks, and takes no lock of the
 * block layer's.  The block layer holds the write locks of the stripes
 * (stripes.h, its own) over every write and punch of a range, and
 * lets a store read the stripes' geometry only.  A failing call
 * reports with nbdkit_error.
 */

#ifndef COW_STORE_H
#define COW_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "blktypes.h"
#include "changes.h"
#include "kept.h"
#include "stripes.h"

struct store;

/* The one record a store keeps of what the overlay holds of blocks:
 * blocks [first, first+n) in state, and of a BLK_PARTIAL block (n is
 * 1) the units it holds (blkmap.h: its sub-blocks, bit i for unit i),
 * units 0 in any other state; and of a block held whole or in part (n
 * is 1), where, the units it holds in place 1, else 0.
 */
struct store_blocks {
  uint64_t first, n;
  enum blk_state state;
  uint32_t units, where;
};

/* The block layer's write locks of [offset, offset+count), which a
 * kept store's flush takes (hold) and drops (release) through these
 * around reading data a write must not change meanwhile.
 */
struct store_holder {
  void (*hold) (void *opaque, uint64_t offset, uint64_t count);
  void (*release) (void *opaque, uint64_t offset, uint64_t count);
  void *opaque;
};

/* A record a kept store loaded.  Returns 0, or -1 to stop. */
typedef int store_found_blocks (void *opaque, const struct store_blocks *r);

struct store_ops {
  /* Makes the store ready for a base of size bytes (> 0): throw-away,
   * makes its map of slots; kept, makes the file's header, or
   * checks that the file was made for this size.  Sets *overhead to
   * the bytes it takes beyond its blocks' (a kept file's header and
   * state area), counted against cow-max-size.  Called once, by the
   * block layer's start, before any request.  Returns 0, or -1 after
   * nbdkit_error.
   */
  int (*start) (struct store *st, uint64_t size, uint64_t *overhead);
  /* Kept: the base size an existing file was made for (0 for a new
   * one), so that the overlay can start from its file before it meets
   * its base; and whether a base of size bytes is that one: 0, or -1
   * after nbdkit_error naming the file.  NULL for a throw-away store.
   */
  uint64_t (*made_size) (struct store *st);
  int (*check_size) (struct store *st, uint64_t size);
  /* Kept: the plugin's facts as its file has them (NULL: none), and
   * records facts there, durably: 0, or -1 after nbdkit_error.  NULL
   * for a throw-away store.
   */
  const struct kept_facts *(*facts) (struct store *st);
  int (*keep_facts) (struct store *st, const struct kept_facts *facts);

  /* The store keeps each byte of the disk in one of two places, 0 and
   * 1, which the block layer chooses (blkmap.h: the units of a block);
   * place 1 only from a point-in-time view on, and only if
   * holds_places (NULL: it does).
   */
  bool (*holds_places) (struct store *st);

  /* As a point-in-time view is made, before it keeps anything: a kept
   * file's metadata is allocated whole on the filesystem, so that no
   * flush while views keep places (the one before they are given back
   * included) needs room the filesystem may then lack.  Returns 1 if
   * it took room, which the view then holds (end_places gives it
   * back), 0 if none, or -1 with *err set (ENOSPC).  NULL: nothing to
   * do.
   */
  int (*begin_places) (struct store *st, int *err);

  /* Once the view's places went back: what begin_places allocated
   * that holds only zeros is given back to the filesystem, so that a
   * view costs the file no room once it ended.  No change may run.
   * NULL: nothing to do.
   */
  void (*end_places) (struct store *st);

  /* pread of disk bytes [offset, offset+count) of allocated blocks
   * from place, taking no lock.  Returns 0, or -1 with *err set.
   */
  int (*read) (struct store *st, void *buf, uint64_t count, uint64_t offset,
               unsigned place, int *err);

  /* Writes buf, or zeros if buf is NULL, into place, allocating space
   * (zeros stay allocated).  Requires the write locks of the range.
   * Returns 0, or -1 with *err set.
   */
  int (*write) (struct store *st, const void *buf, uint64_t count,
                uint64_t offset, unsigned place, int *err);

  /* Deallocates [offset, offset+count) of place, whole units, which
   * then read as zeros.  Requires the write locks of the range.
   * Returns 0, or -1 with errno set if the filesystem could not punch
   * a hole.
   */
  int (*punch) (struct store *st, uint64_t count, uint64_t offset,
                unsigned place);

  /* Kept: what the overlay held when the file was opened, a record
   * for each run of blocks in the overlay or zero and for each block in
   * part, in order; called once, by the block layer's start, after
   * start.  Returns what found first returned that was not 0, or 0.
   * NULL for a throw-away store, which starts empty.
   */
  int (*loaded_blocks) (struct store *st, store_found_blocks *found,
                        void *opaque);

  /* Kept: makes room for, then notes, a record of blocks, so that the
   * next flush writes it; the store's copy of the records is its own,
   * under its own lock.  reserve_blocks makes room for any record of
   * blocks [first, first+n), with in_part a BLK_PARTIAL one too and one
   * with units in place 1 (n is 1), before the change's I/O: returns
   * 0, or -1 with errno set.
   * set_blocks requires it.  NULL for a throw-away store.
   */
  int (*reserve_blocks) (struct store *st, uint64_t first, uint64_t n,
                         bool in_part);
  void (*set_blocks) (struct store *st, const struct store_blocks *r);

  /* Whether a block can be in the overlay in part (BLK_PARTIAL), the
   * units it does not hold read from the base: NULL, it can (a
   * throw-away store holds whatever bytes are written); a kept file
   * only where its format keeps which sub-blocks each block holds, in
   * sub-blocks of the block layer's size (blkmap_start).
   */
  bool (*holds_parts) (struct store *st);

  /* Kept: whether the overlay can have checkpoints: only if its file
   * keeps them (format version 4), with the marks of changed blocks,
   * which the store then reads from and writes to the block layer's
   * changes (store_kept_open).  NULL: it can, in memory, as long as the
   * store lives.
   */
  bool (*allows_checkpoints) (struct store *st);

  /* Kept, keeping checkpoints: the checkpoints changed, or the marks of
   * blocks [first, first+n) were raised; the next flush writes them.
   */
  void (*note_checkpoints) (struct store *st);
  void (*note_marks) (struct store *st, uint64_t first, uint64_t n);

  /* Kept, keeping checkpoints: around every change of the overlay's
   * contents (a write, zero or trim), begin before its first byte and
   * end once it is marked (changes.h), so that a flush knows whether
   * the marks it writes hold every change written to the file.
   * change_begin returns 0, or -1 with *err set (the change must not
   * be made, and change_end is not called), or 1: then, if the change
   * may write in place into a block whose mark it raises (a block the
   * overlay holds), change_in_place, which returns once the file says
   * its marks may miss a change: 0, or -1 with *err set (then as
   * change_begin's failure, after change_end).
   */
  int (*change_begin) (struct store *st, int *err);
  int (*change_in_place) (struct store *st, int *err);
  void (*change_end) (struct store *st);

  /* Kept: makes every write completed so far durable, one flush at a
   * time (the block layer's flush_lock).  A flush that reads data a
   * write must not change meanwhile holds that range's write locks
   * through holder (NULL when no request runs).  Returns 0, or -1 with
   * *err set.  NULL for a throw-away store: it dies with nbdkit, so
   * there is nothing to make durable.
   */
  int (*flush) (struct store *st, const struct store_holder *holder,
                int *err);

  /* The files the store keeps its data in, and the disk space the
   * store takes in bytes, its blocks in the overlay holding data_bytes:
   * kept, its file's; throw-away, data_bytes of the files all
   * throw-away overlays share.
   */
  unsigned (*files) (struct store *st);
  uint64_t (*bytes) (struct store *st, uint64_t data_bytes);

  /* Closes the store and frees it: kept, flushed first if started, and
   * marked closed cleanly if that flush worked.  Returns 0, or -1 after
   * nbdkit_error if the flush failed.
   */
  int (*close) (struct store *st);
};

struct store {
  const struct store_ops *ops;
  const struct stripes *stripes;        /* the block layer's: geometry */
};

struct temp_files;

/* A throw-away store in slots of files, striped as stripes says.
 * Returns NULL after nbdkit_error.
 */
extern struct store *store_temp_new (struct temp_files *files,
                                     const struct stripes *stripes);

/* The kept store at path for export name, the file created if it is
 * missing, and locked against other processes; its writes are cut as
 * stripes says.  An existing file must have been made for this block
 * size and name, and be sound: its records are loaded now, before its
 * base size is known (checked by start), so that a damaged file is
 * refused as soon as it is opened; loaded_blocks gives them to the
 * block layer at its start.  A file of format version 4 keeps
 * the checkpoints and marks of changes, the block layer's: start
 * restores them there (after changes_start), flushes write them.
 * Returns NULL after nbdkit_error.
 */
extern struct store *store_kept_open (const char *path, const char *name,
                                      uint32_t block_size,
                                      const struct stripes *stripes,
                                      struct changes *changes);

/* The calls of a store's operations, the optional ones checked here
 * only.
 */
static inline int
store_start (struct store *st, uint64_t size, uint64_t *overhead)
{
  return st->ops->start (st, size, overhead);
}

static inline uint64_t
store_made_size (struct store *st)
{
  return st->ops->made_size ? st->ops->made_size (st) : 0;
}

static inline int
store_check_size (struct store *st, uint64_t size)
{
  return st->ops->check_size ? st->ops->check_size (st, size) : 0;
}

static inline const struct kept_facts *
store_facts (struct store *st)
{
  return st->ops->facts ? st->ops->facts (st) : NULL;
}

static inline int
store_keep_facts (struct store *st, const struct kept_facts *facts)
{
  return st->ops->keep_facts ? st->ops->keep_facts (st, facts) : 0;
}

static inline bool
store_holds_places (struct store *st)
{
  return st->ops->holds_places == NULL || st->ops->holds_places (st);
}

static inline int
store_begin_places (struct store *st, int *err)
{
  return st->ops->begin_places ? st->ops->begin_places (st, err) : 0;
}

static inline void
store_end_places (struct store *st)
{
  if (st->ops->end_places)
    st->ops->end_places (st);
}

static inline int
store_read (struct store *st, void *buf, uint64_t count, uint64_t offset,
            unsigned place, int *err)
{
  return st->ops->read (st, buf, count, offset, place, err);
}

static inline int
store_write (struct store *st, const void *buf, uint64_t count,
             uint64_t offset, unsigned place, int *err)
{
  return st->ops->write (st, buf, count, offset, place, err);
}

static inline int
store_punch (struct store *st, uint64_t count, uint64_t offset,
             unsigned place)
{
  return st->ops->punch (st, count, offset, place);
}

static inline int
store_loaded_blocks (struct store *st, store_found_blocks *found,
                     void *opaque)
{
  return st->ops->loaded_blocks ? st->ops->loaded_blocks (st, found, opaque)
                                : 0;
}

static inline int
store_reserve_blocks (struct store *st, uint64_t first, uint64_t n,
                      bool in_part)
{
  return st->ops->reserve_blocks
         ? st->ops->reserve_blocks (st, first, n, in_part) : 0;
}

static inline void
store_set_blocks (struct store *st, const struct store_blocks *r)
{
  if (st->ops->set_blocks)
    st->ops->set_blocks (st, r);
}

static inline bool
store_holds_parts (struct store *st)
{
  return st->ops->holds_parts == NULL || st->ops->holds_parts (st);
}

static inline bool
store_allows_checkpoints (struct store *st)
{
  return st->ops->allows_checkpoints == NULL ||
         st->ops->allows_checkpoints (st);
}

static inline void
store_note_checkpoints (struct store *st)
{
  if (st->ops->note_checkpoints)
    st->ops->note_checkpoints (st);
}

static inline void
store_note_marks (struct store *st, uint64_t first, uint64_t n)
{
  if (st->ops->note_marks)
    st->ops->note_marks (st, first, n);
}

static inline int
store_change_begin (struct store *st, int *err)
{
  return st->ops->change_begin ? st->ops->change_begin (st, err) : 0;
}

static inline int
store_change_in_place (struct store *st, int *err)
{
  return st->ops->change_in_place ? st->ops->change_in_place (st, err) : 0;
}

static inline void
store_change_end (struct store *st)
{
  if (st->ops->change_end)
    st->ops->change_end (st);
}

static inline bool
store_flushes (const struct store *st)
{
  return st->ops->flush != NULL;
}

/* Requires store_flushes. */
static inline int
store_flush (struct store *st, const struct store_holder *holder, int *err)
{
  return st->ops->flush (st, holder, err);
}

static inline unsigned
store_files (struct store *st)
{
  return st->ops->files (st);
}

static inline uint64_t
store_bytes (struct store *st, uint64_t data_bytes)
{
  return st->ops->bytes (st, data_bytes);
}

static inline int
store_close (struct store *st)
{
  return st->ops->close (st);
}

#endif /* COW_STORE_H */
