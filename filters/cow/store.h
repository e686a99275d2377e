/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The overlay's store: where the data of allocated blocks lives.  Two
 * stores sit behind this one interface, as dm-snapshot keeps its
 * transient and persistent exception stores:
 *
 *   store-temp.c  throw-away: a region of the temporary files all
 *                 throw-away overlays share (tempfiles.h), one per
 *                 stripe, disk byte x at byte x of the region;
 *   store-kept.c  kept (cow-file=PATH): one file in the kept format
 *                 (kept/kept.h), crash-safe once flushed.
 *
 * The block layer calls only these.  It says which blocks are
 * allocated; a store only keeps their bytes.  Both cut the disk into
 * stripes (stripes.h) whose write locks the block layer holds around
 * the state lookup and the writes of a fast-path write, and a store
 * takes around its punches.  A failing call reports with nbdkit_error.
 */

#ifndef COW_STORE_H
#define COW_STORE_H

#include <stdbool.h>
#include <stdint.h>

#include "statemap.h"
#include "stripes.h"

/* The block layer's state map and the lock that protects it
 * (state_lock), as a kept store reads them: its start loads the
 * states, and its flush copies state pages under the lock.
 */
struct store_states {
  struct statemap *map;
  void (*lock) (struct store_states *states);
  void (*unlock) (struct store_states *states);
};

struct store;

struct store_ops {
  /* Makes the store ready for a base of size bytes (> 0): throw-away,
   * takes its region of the files; kept, makes the file's header, or
   * checks that the file was made for this size (its states were loaded
   * when it was opened).  Sets overhead.  Called once, by the first
   * blk_set_size, holding state_lock: no request runs before it
   * returns.  Returns 0, or -1 after nbdkit_error.
   */
  int (*start) (struct store *st, uint64_t size);

  /* pread of disk bytes [offset, offset+count) of allocated blocks,
   * taking no lock.  Returns 0, or -1 with *err set.
   */
  int (*read) (struct store *st, void *buf, uint64_t count, uint64_t offset,
               int *err);

  /* Writes buf, or zeros if buf is NULL, allocating space (zeros stay
   * allocated).  Requires the write locks of the range.  Returns 0, or
   * -1 with *err set.
   */
  int (*write_locked) (struct store *st, const void *buf, uint64_t count,
                       uint64_t offset, int *err);

  /* Deallocates [offset, offset+count), whole blocks (the disk's last
   * one may be short), which then read as zeros, taking the write
   * locks and adding the time waited for them to *waited.  Returns 0,
   * or -1 with errno set if the filesystem could not punch a hole.
   */
  int (*punch) (struct store *st, uint64_t count, uint64_t offset,
                uint64_t *waited);

  /* Kept: makes room for, then notes, a change of the states of
   * blocks [first, first+n), so that the next flush writes them.  Under
   * state_lock.  NULL for a throw-away store.  reserve_states returns
   * 0, or -1 with errno set.
   */
  int (*reserve_states) (struct store *st, uint64_t first, uint64_t n);
  void (*states_changed) (struct store *st, uint64_t first, uint64_t n);

  /* Kept: makes every write completed so far durable, one flush at a
   * time (the block layer's flush_lock).  Returns 0, or -1 with *err
   * set.  NULL for a throw-away store: it dies with nbdkit, so there
   * is nothing to make durable.
   */
  int (*flush) (struct store *st, int *err);

  /* The files of the store, and the disk space they take in bytes. */
  unsigned (*files) (struct store *st);
  uint64_t (*bytes) (struct store *st);

  /* Closes the store and frees it: kept, flushed first if started, and
   * marked closed cleanly if that flush worked.  Returns 0, or -1 after
   * nbdkit_error if the flush failed.
   */
  int (*close) (struct store *st);
};

struct store {
  const struct store_ops *ops;
  struct stripes stripes;
  /* The bytes the store takes beyond its blocks' (a kept file's header
   * and state area), counted against cow-max-size; set by start.
   */
  uint64_t overhead;
};

struct temp_files;

/* A throw-away store in files, striped over their number, for blocks
 * of 2^block_shift bytes; its region is given out by start.  Returns
 * NULL after nbdkit_error.
 */
extern struct store *store_temp_new (struct temp_files *files,
                                     unsigned block_shift);

/* The kept store at path for export name, the file created if it is
 * missing, and locked against other processes; its writes are cut
 * into nr_stripes stripes.  An existing file must have been made for
 * this block size and name, and be sound: its states are loaded into
 * states now, before its base size is known (checked by start), so
 * that a damaged file is refused as soon as it is opened.  Returns
 * NULL after nbdkit_error.
 */
extern struct store *store_kept_open (const char *path, const char *name,
                                      uint32_t block_size,
                                      unsigned nr_stripes,
                                      struct store_states *states);

/* The calls of a store's operations, the optional ones checked here
 * only.
 */
static inline int
store_start (struct store *st, uint64_t size)
{
  return st->ops->start (st, size);
}

static inline int
store_read (struct store *st, void *buf, uint64_t count, uint64_t offset,
            int *err)
{
  return st->ops->read (st, buf, count, offset, err);
}

static inline int
store_write_locked (struct store *st, const void *buf, uint64_t count,
                    uint64_t offset, int *err)
{
  return st->ops->write_locked (st, buf, count, offset, err);
}

static inline int
store_punch (struct store *st, uint64_t count, uint64_t offset,
             uint64_t *waited)
{
  return st->ops->punch (st, count, offset, waited);
}

static inline int
store_reserve_states (struct store *st, uint64_t first, uint64_t n)
{
  return st->ops->reserve_states ? st->ops->reserve_states (st, first, n) : 0;
}

static inline void
store_states_changed (struct store *st, uint64_t first, uint64_t n)
{
  if (st->ops->states_changed)
    st->ops->states_changed (st, first, n);
}

static inline bool
store_flushes (const struct store *st)
{
  return st->ops->flush != NULL;
}

/* Requires store_flushes. */
static inline int
store_flush (struct store *st, int *err)
{
  return st->ops->flush (st, err);
}

static inline unsigned
store_files (struct store *st)
{
  return st->ops->files (st);
}

static inline uint64_t
store_bytes (struct store *st)
{
  return st->ops->bytes (st);
}

static inline int
store_close (struct store *st)
{
  return st->ops->close (st);
}

#endif /* COW_STORE_H */
