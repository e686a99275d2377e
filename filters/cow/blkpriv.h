/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer's own state, shared by its files and nothing else:
 * blk.c, the requests and the state machine they follow; blkcopy.c,
 * the copy-ups; blkplaced.c, the changes by units in places;
 * blklife.c, an overlay made, started, flushed and freed;
 * blkchanges.c, its checkpoints; blkview.c, its point-in-time view;
 * blkgiveback.c, the give-back of the places an ended view kept;
 * blkviewread.c, the reads of its views; blkheld.h, what blocks hold,
 * changed under their rmw locks; blkstore.h, its writes and punches of
 * its store; blkbase.c, its reads of the base; blkstats.c, its
 * statistics.  Each lock says here what it protects; docs/design.md
 * has the lock order.
 */

#ifndef COW_BLKPRIV_H
#define COW_BLKPRIV_H

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "basemap.h"
#include "bgthread.h"
#include "blk.h"
#include "blkmap.h"
#include "blktypes.h"
#include "changes.h"
#include "checkpoint.h"
#include "gate.h"
#include "lockwaits.h"
#include "rangelock.h"
#include "shardctr.h"
#include "space.h"
#include "store.h"
#include "stripes.h"

struct blk {
  /* Set once, when the layer is made: the data of allocated blocks
   * (store.h), and the disk space counted against cow-max-size, the
   * server's.
   */
  struct store *store;
  struct space *space;

  /* The write locks of the stripes of the disk, one per stripe: held
   * over every write and punch of the store, and by a fast-path write
   * over its state lookup too (blk_store_write_if_held).  The kernel
   * serializes the writes of one file anyway (the inode lock), but its
   * waiters spin, which on few cores starved the threads doing useful
   * work; a mutex waits asleep.  Taken a range's together, in
   * ascending stripe order (stripes_lock).
   */
  struct stripes stripes;

  /* The rmw locks, on ranges of blocks: a block's state changes only
   * with its rmw lock held, which covers the I/O that justifies the
   * change.
   */
  struct rangelock rmw_locks;

  /* Under state_lock: the geometry and the state of every block. */
  struct blkmap map;

  /* Under base_map_lock: what the base's extents told (basemap.h). */
  struct basemap base_map;

  /* Under their own lock: the checkpoints and the marks of the blocks
   * changed since them (changes.h).
   */
  struct changes changes;

  /* Under start_lock, which serializes the first blk_set_size (or
   * blk_start_from_file): that call fixes the size and starts the
   * store (I/O: a kept file's header; a throw-away store's map of
   * slots); later calls only look, or check a base against a size
   * taken from the file.  base_met: a base of that size has been met.
   * store_overhead: the store's bytes besides blocks, set with the
   * size.
   */
  mutex_t start_lock;
  bool base_met FIELD_GUARDED_BY (start_lock);
  uint64_t store_overhead FIELD_GUARDED_BY (start_lock);

  /* Lets one flush of a kept store run at a time. */
  struct countedlock flush_lock;

  /* Every change of the overlay's contents (a write, zero or trim) and
   * every read of the view passes the gate; making or deleting the
   * view closes it, so that a change lies wholly before or after the
   * view's instant, and no read of it runs while it goes.
   */
  struct gate gate;

  /* The point-in-time view (blkview.c), made and deleted with the gate
   * closed, one at a time (the caller serializes them): view_state
   * (enum blk_view_state, atomic: a write that finds no room for it
   * breaks it with the gate open), view_name, set with it, and
   * view_kept, the bytes of the units it alone keeps, charged against
   * cow-max-size (atomic).
   */
  int view_state;
  char view_name[CHECKPOINT_NAME_MAX + 1] FIELD_GUARDED_BY (gate);
  uint32_t view_epoch FIELD_GUARDED_BY (gate);
  uint64_t view_kept;

  /* With the gate closed (atomic, to be read with it open):
   * view_places, whether the view's records keep units in places the
   * overlay no longer uses, from its making until they are punched
   * (when it is deleted, or after it broke); view_places_given, how
   * many times they were; view_room, whether the store took room on
   * the filesystem for the view (store_begin_places), given back with
   * the places.
   */
  bool view_places;
  uint64_t view_places_given;
  bool view_room;

  /* The give-back of those places in the background (blkgiveback.c,
   * which alone takes give_back_lock): giving_back, set with the gate
   * closed when a give-back is handed to give_back_thread and cleared
   * once it freed the records, each clearing signalled on
   * give_back_ended; give_back_started, whether that thread runs
   * (started at the first give-back, with the gate closed).
   * Atomic: give_back_left, the blocks the running give-back has yet
   * to look at, and give_back_stop, set at the overlay's end to stop
   * it short.
   */
  mutex_t give_back_lock;
  pthread_cond_t give_back_ended;
  bool giving_back FIELD_GUARDED_BY (give_back_lock);
  bool give_back_started FIELD_GUARDED_BY (gate);
  struct bgthread give_back_thread;
  uint64_t give_back_left;
  bool give_back_stop;

  /* Atomic.  sized: set once, under start_lock, and read without it,
   * so that no one waits on the start's I/O to learn that it is not
   * done; once true, the size and the store are set.
   * copy_ups_resume: reads copy nothing up before this time
   * (monotonic_ns; 0: none), set when a read's copy-up found no room.
   */
  bool sized;
  uint64_t copy_ups_resume;

  /* Counted into without a lock: enum counter, and the waits for every
   * lock above by enum blk_lock.
   */
  struct shardctr counters;
  struct lockwaits waits;
};

enum counter {
  COPY_UPS_READ,                /* blocks, see struct blk_stats */
  COPY_UPS_CACHE,
  COPY_UPS_RMW,
  COPY_UPS_FILL,
  BASE_READS,
  BASE_READ_BYTES,
  VIEW_COPIED_BYTES,
  COUNTERS
};

/* blkview.c, for the requests of blk.c.  blk_view_keep takes bytes of
 * space for units the view alone keeps from now on: false if it
 * cannot, and then the view is broken (and keeps nothing).
 * blk_view_break_if_keeping breaks the live view if it keeps any
 * bytes, so that a client's change that found no room (under
 * cow-max-size, or on the filesystem) can have them: returns whether
 * it broke it.
 */
extern bool blk_view_keep (struct blk *blk, uint64_t bytes);
extern bool blk_view_break_if_keeping (struct blk *blk);

/* blkview.c: blk_view_unkeep gives back bytes blk_view_keep took for
 * units that did not move after all.  blk_view_break_in_place breaks
 * the live view, whatever it keeps, when the overlay's filesystem has
 * no room for the units it keeps to move: returns whether it broke it
 * (the write then goes on in place).
 */
extern void blk_view_unkeep (struct blk *blk, uint64_t bytes);
extern bool blk_view_break_in_place (struct blk *blk);

/* blkview.c, for a change (write, zero, trim) of blk.c that found no
 * room on the overlay's filesystem: breaks the live view if it keeps
 * any units or the store holds room for it, and gives back to the
 * filesystem the places (and room) a broken view kept, waiting for
 * the give-back.  Returns whether places were given back since the
 * count blk_view_places_given read before the change: it may then try
 * once more.  Requires the gate not passed and no lock held.
 */
extern bool blk_view_give_room (struct blk *blk, uint64_t given_before);

static inline uint64_t
blk_view_places_given (struct blk *blk)
{
  return __atomic_load_n (&blk->view_places_given, __ATOMIC_SEQ_CST);
}

/* After a change: if the view broke (no room under cow-max-size or on
 * the filesystem), hands the places it kept to the background
 * give-back, unless one runs (blkview.c).  Requires the gate not
 * passed and no lock held.
 */
extern void blk_view_give_back_broken (struct blk *blk);

/* blkgiveback.c: the give-back of the places an ended view's records
 * keep (view_places), made on disk the map's by a flush.
 * blk_give_back_init readies it (0, or -1 with errno set) and
 * blk_give_back_destroy undoes that, once the give-back is stopped.
 * blk_give_back_now flushes, punches them (if the flush succeeded:
 * else they stay until a kept file next opens) and frees the records,
 * with the gate closed; blk_give_back_free frees the records (and, if punched, the
 * store's room for the view), with the gate closed.
 * blk_give_back_in_background hands them to the overlay's thread,
 * with the gate closed: false if it cannot start (nothing handed).
 * blk_giving_back says whether a give-back runs, and the blocks it has
 * yet to look at (blocks_left may be NULL); blk_give_back_wait waits,
 * holding nothing, until none runs; blk_give_back_stop, at the
 * overlay's end, stops it short (its records freed, the rest left to
 * the next open of a kept file) and ends the thread, holding nothing.
 */
extern int blk_give_back_init (struct blk *blk);
extern void blk_give_back_destroy (struct blk *blk);
extern void blk_give_back_now (struct blk *blk) REQUIRES (blk->gate);
extern void blk_give_back_free (struct blk *blk, bool punched)
  REQUIRES (blk->gate);
extern bool blk_give_back_in_background (struct blk *blk)
  REQUIRES (blk->gate);
extern bool blk_giving_back (struct blk *blk, uint64_t *blocks_left);
extern void blk_give_back_wait (struct blk *blk);
extern void blk_give_back_stop (struct blk *blk);

/* The checkpoints made with views (blkchanges.c, changes.h):
 * blk_checkpoint_create_with_view makes one, as blk_checkpoint_create;
 * blk_checkpoint_end_view notes that its view was deleted, returning
 * whether it changed a checkpoint, which blk_checkpoints_keep then
 * makes durable in a kept file (as a checkpoint deleted is: if that
 * flush fails, with the next); blk_checkpoint_view_of copies into name
 * the one whose view was not deleted, if any (a live view's, or one
 * that ended with the server that made it), and returns whether there
 * is one.
 */
extern int blk_checkpoint_create_with_view (struct blk *blk,
                                            const char *name);
extern bool blk_checkpoint_end_view (struct blk *blk, const char *name);
extern void blk_checkpoints_keep (struct blk *blk);
extern bool blk_checkpoint_view_of (struct blk *blk, char *name);

/* At the overlay's end (blk_free): ends its view, if any, giving back
 * what it kept, to the cap and to the filesystem (blkview.c).  No
 * request may run.
 */
extern void blk_view_end (struct blk *blk);

/* The view's state, read with no lock (view_state is atomic). */
static inline enum blk_view_state
blk_view_state_of (struct blk *blk)
{
  return __atomic_load_n (&blk->view_state, __ATOMIC_ACQUIRE);
}

static inline void
blk_view_settle (struct blk *blk)
{
  if (blk_view_state_of (blk) == BLK_VIEW_BROKEN)
    blk_view_give_back_broken (blk);
}

/* blk.c, for the view's reads (blkview.c).  blk_held_run: the run
 * of [offset, end) from offset, inside one block, that reads alike as
 * the overlay holds it, or as the view does (in_view): *state
 * BLK_ALLOCATED, from the store's place *place (place may be NULL),
 * BLK_ZERO, or BLK_NOT_ALLOCATED (the base).  blk_read_held: a read of
 * [offset, offset+count) as either holds it, copying nothing up;
 * returns 0, or -1 with *err set.
 */
extern uint64_t blk_held_run (struct blk *blk, bool in_view, uint64_t offset,
                              uint64_t end, enum blk_state *state,
                              unsigned *place);
extern int blk_read_held (struct blk *blk, const struct blk_base *base,
                          bool in_view, void *buf, uint32_t count,
                          uint64_t offset, int *err);

/* blkbase.c: every read of the base, counted.  blk_base_read reads
 * [offset, offset+len) into buf; blk_base_read_data does too, but the
 * runs the base's extents say read as zeros are zeroed in buf, not
 * read (the fill reads no hole, even inside a block; a base that
 * cannot tell is read whole).  Return 0, or -1 with *err set.
 */
extern int blk_base_read (struct blk *blk, const struct blk_base *base,
                          void *buf, uint32_t len, uint64_t offset, int *err);
extern int blk_base_read_data (struct blk *blk, const struct blk_base *base,
                               char *buf, uint32_t len, uint64_t offset,
                               int *err);

/* blkcopy.c, for blk_read: a read's copy-up of the range, counted in
 * the fill with BLK_READ_FILL, else in cow-on-read.  One that finds no
 * room is given up, and the blocks it did not copy read from the base,
 * since a read never needs the overlay.  Returns 0, or -1 with *err
 * set.
 */
extern int blk_read_copy_up (struct blk *blk, const struct blk_base *base,
                             uint32_t count, uint64_t offset,
                             enum blk_read_mode mode, int *err);

/* blkplaced.c, for the requests of blk.c from the first view on, under
 * the rmw locks of the blocks.  blk_write_placed writes [offset, end)
 * of buf (zeros if NULL) into blocks [first, last] by units in places,
 * the space of the blocks not held taken already.  blk_discard_placed
 * zeroes blocks [first, first+n), their states reserved, punching both
 * places; while the view lives, block by block, its record made first,
 * and the units it keeps left where they are.  Return 0, or -1 with
 * *err set.
 */
extern int blk_write_placed (struct blk *blk, const struct blk_base *base,
                             const char *buf, uint64_t offset, uint64_t end,
                             uint64_t first, uint64_t last, int *err)
  REQUIRES (blk->rmw_locks);
extern int blk_discard_placed (struct blk *blk, uint64_t first, uint64_t n,
                               int *err) REQUIRES (blk->rmw_locks);

/* Whether err says a change of the overlay found no room: the space
 * cap's share spent, the overlay's filesystem full, or its file at its
 * largest.
 */
static inline bool
blk_no_room (int err)
{
  return err == ENOSPC || err == EDQUOT || err == EFBIG;
}

/* Whether the thread holds the rmw locks of blocks [first, first+n),
 * in checked builds.
 */
static inline bool
blk_rmw_held (struct blk *blk, uint64_t first, uint64_t n)
{
  return rangelock_held (&blk->rmw_locks, first, n);
}

static inline void
stat_add (struct blk *blk, enum counter counter, uint64_t n)
{
  shardctr_add (&blk->counters, counter, n);
}

#endif /* COW_BLKPRIV_H */
