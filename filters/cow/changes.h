/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Which blocks of an overlay changed since when: its named checkpoints
 * and, while it has one, a mark on each block a write, zero or trim
 * changed.  Each checkpoint takes an epoch, a number never taken
 * before in the overlay, and a change marks its blocks with the newest
 * checkpoint's epoch, so that a block changed since checkpoint T
 * exactly when its mark is at least T's epoch.  Marks only grow.  The
 * changes view of an export (cow.c) reads them; the block layer
 * (blk.c) makes them.
 *
 * A change marks its blocks after its I/O, all with one epoch read
 * once, so that a change that completed before a checkpoint was made
 * lies before it, one that began after it was made lies after it, and
 * one in flight lies wholly on one side.
 */

#ifndef COW_CHANGES_H
#define COW_CHANGES_H

#include <stdbool.h>
#include <stdint.h>

#include "checkpoint.h"
#include "slotmap.h"
#include "tsa.h"

struct changes {
  /* The epoch changes mark blocks with: the newest checkpoint's, or 0
   * while there is none, when no mark is made.  Written under lock,
   * read without it.
   */
  uint32_t current;

  /* A mark that could not be made (out of memory) makes the
   * checkpoints up to this epoch report every block of the overlay as
   * changed: more than changed, never less.  Written under lock, read
   * without it.
   */
  uint32_t lost;

  /* Protects what follows, and serializes the reservations of the
   * marks' leaves; marks are read and raised without it, as slotmap.h
   * allows.  Held over nothing slower than a malloc, and nothing is
   * taken inside it.
   */
  mutex_t lock;
  /* the epoch of each block's last change: its leaves reserved */
  struct slotmap marks FIELD_GUARDED_BY (lock);
  bool started FIELD_GUARDED_BY (lock);  /* marks sized by changes_start */
  /* oldest first */
  struct checkpoint checkpoints[CHECKPOINTS_MAX] FIELD_GUARDED_BY (lock);
  unsigned count FIELD_GUARDED_BY (lock);
  /* the newest epoch ever taken */
  uint32_t last_epoch FIELD_GUARDED_BY (lock);
};

extern void changes_init (struct changes *ch);
extern void changes_free (struct changes *ch);

/* Sizes the marks for a disk of blocks blocks before any change is
 * marked (again, if the overlay's start failed and is tried again).
 * Returns 0, or -1 with errno set.
 */
extern int changes_start (struct changes *ch, uint64_t blocks);

/* Restores the checkpoints a kept overlay's file holds, after
 * changes_start and before any change: list (count of them, oldest
 * first) and the newest epoch ever taken.  One with no id (a file that
 * kept none) takes a new one.
 */
extern void changes_restore (struct changes *ch, const struct checkpoint *list,
                             unsigned count, uint32_t last_epoch);

/* Blocks [first, first+n) changed.  Returns whether a mark was raised
 * (true, too, when one could not be, with the marks lost).  Costs one
 * atomic load while the overlay has no checkpoint.
 */
extern bool changes_mark_epoch (struct changes *ch, uint64_t first,
                                uint64_t n, uint32_t epoch);

static inline bool
changes_mark (struct changes *ch, uint64_t first, uint64_t n)
{
  uint32_t epoch = __atomic_load_n (&ch->current, __ATOMIC_ACQUIRE);

  return epoch != 0 && n > 0 && changes_mark_epoch (ch, first, n, epoch);
}

/* The marks: entry b is the epoch of block b's last change while a
 * checkpoint existed, or 0.  To read only, without a lock.
 */
static inline const struct slotmap *
changes_marks (const struct changes *ch)
{
  return &ch->marks;
}

/* Whether a mark could not be made (changes.lost).  Takes no lock. */
static inline bool
changes_lost (struct changes *ch)
{
  return __atomic_load_n (&ch->lost, __ATOMIC_ACQUIRE) != 0;
}

/* Whether a block's mark says it changed since epoch since: a mark of
 * at least since, or marks lost up to since.  Takes no lock.
 */
static inline bool
changes_mark_since (struct changes *ch, uint32_t mark, uint32_t since)
{
  return since == 0 || mark >= since ||
         since <= __atomic_load_n (&ch->lost, __ATOMIC_ACQUIRE);
}

/* Whether block b was changed since the newest checkpoint: a change of
 * it raises no mark.  False while the overlay has none.  Takes no lock.
 */
static inline bool
changes_marked (struct changes *ch, uint64_t b)
{
  uint32_t epoch = __atomic_load_n (&ch->current, __ATOMIC_ACQUIRE);

  return epoch != 0 && slotmap_get (&ch->marks, b) >= epoch;
}

/* The newest epoch ever taken. */
extern uint32_t changes_last_epoch (struct changes *ch);

/* Whether the overlay has a checkpoint.  Takes no lock. */
static inline bool
changes_any (struct changes *ch)
{
  return __atomic_load_n (&ch->current, __ATOMIC_ACQUIRE) != 0;
}

/* Makes checkpoint name, after every change marked so far, with a new
 * id; with view, the one made with the view (struct checkpoint), no
 * other being so any more.  Returns 0, or -1 with errno set: EINVAL,
 * not a valid name; EEXIST, it exists; EMLINK, the overlay has
 * CHECKPOINTS_MAX; EAGAIN, the overlay has not started (no client has
 * opened it); EOVERFLOW, no epoch left.
 */
extern int changes_create (struct changes *ch, const char *name, bool view);

/* The view made with checkpoint name was deleted: it is no longer the
 * view's.  Returns whether it was.
 */
extern bool changes_end_view (struct changes *ch, const char *name);

/* Whether a checkpoint was made with a view not deleted since, copying
 * its name into name (room for CHECKPOINT_NAME_MAX + 1).
 */
extern bool changes_view_of (struct changes *ch, char *name);

/* Deletes checkpoint name.  Returns 0, or -1 with errno ENOENT. */
extern int changes_delete (struct changes *ch, const char *name);

/* Sets *since to the epoch of checkpoint name.  Returns 0, or -1 with
 * errno ENOENT.
 */
extern int changes_since (struct changes *ch, const char *name,
                          uint32_t *since);

/* Copies checkpoint name into *out.  Returns 0, or -1 with errno
 * ENOENT.
 */
extern int changes_get (struct changes *ch, const char *name,
                        struct checkpoint *out);

/* Copies the checkpoints, oldest first, into out (room for
 * CHECKPOINTS_MAX) and returns how many; sets *last_epoch, if not
 * NULL, to the newest epoch ever taken.
 */
extern unsigned changes_list (struct changes *ch, struct checkpoint *out,
                              uint32_t *last_epoch);

/* Sets *changed to whether block b changed since epoch since (0: since
 * the overlay began, every block) and returns the end of the run of
 * blocks in [b, stop) of which the same holds.  Requires b < stop, and
 * the marks started if since is not 0.
 */
extern uint64_t changes_run (struct changes *ch, uint64_t b, uint64_t stop,
                             uint32_t since, bool *changed);

#endif /* COW_CHANGES_H */
