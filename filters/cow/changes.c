/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Which blocks of an overlay changed since when (changes.h). */

#include <config.h>

#include <errno.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "changes.h"
#include "checks.h"
#include "lockranks.h"

void
changes_init (struct changes *ch)
{
  memset (ch, 0, sizeof *ch);
  held_init (&ch->lock, LOCK_RANK_CHANGES);
}

void
changes_free (struct changes *ch)
{
  slotmap_free (&ch->marks);
  held_destroy (&ch->lock);
}

int
changes_start (struct changes *ch, uint64_t blocks)
{
  int r;

  held_lock (&ch->lock);
  slotmap_free (&ch->marks);
  r = slotmap_init (&ch->marks, blocks);
  ch->started = r == 0;
  held_unlock (&ch->lock);
  return r;
}

void
changes_restore (struct changes *ch, const struct checkpoint *list,
                 unsigned count, uint32_t last_epoch)
{
  unsigned i;

  held_lock (&ch->lock);
  memcpy (ch->checkpoints, list, count * sizeof *list);
  for (i = 0; i < count; ++i)
    if (ch->checkpoints[i].id == 0)
      ch->checkpoints[i].id = checkpoint_new_id ();
  ch->count = count;
  ch->last_epoch = last_epoch;
  __atomic_store_n (&ch->current, count ? list[count - 1].epoch : 0,
                    __ATOMIC_RELEASE);
  held_unlock (&ch->lock);
}

/* Whether every block of [first, first+n) has a mark of at least
 * epoch: a change of blocks changed again since the newest checkpoint
 * writes nothing.  Marks are raised without the lock where their
 * leaves exist; only a new leaf takes it.
 */
static bool
all_marked (struct changes *ch, uint64_t first, uint64_t n, uint32_t epoch)
{
  uint64_t b;

  for (b = first; b < first + n; ++b)
    if (slotmap_get (&ch->marks, b) < epoch)
      return false;
  return true;
}

/* The memory for the marks ran out: the checkpoints so far can no
 * longer tell what changed since them, and say all of the overlay.
 */
static void
lose_marks (struct changes *ch) REQUIRES (ch->lock)
{
  if (ch->lost == 0)
    nbdkit_error ("cow: out of memory for the marks of changed blocks: the "
                  "changes views since the checkpoints made so far report "
                  "every block of the overlay");
  __atomic_store_n (&ch->lost, ch->last_epoch, __ATOMIC_RELEASE);
}

bool
changes_mark_epoch (struct changes *ch, uint64_t first, uint64_t n,
                    uint32_t epoch)
{
  if (all_marked (ch, first, n, epoch))
    return false;
  if (slotmap_raise (&ch->marks, first, n, epoch))
    return true;
  held_lock (&ch->lock);
  if (slotmap_reserve (&ch->marks, first, n) == -1)
    lose_marks (ch);
  else
    slotmap_raise (&ch->marks, first, n, epoch);
  held_unlock (&ch->lock);
  return true;
}

/* 0 if find found a checkpoint at i, else -1 with errno ENOENT. */
static int
found (int i)
{
  if (i >= 0)
    return 0;
  errno = ENOENT;
  return -1;
}

/* The index of checkpoint name, or -1. */
static int
find (struct changes *ch, const char *name) REQUIRES (ch->lock)
{
  unsigned i;

  for (i = 0; i < ch->count; ++i)
    if (strcmp (ch->checkpoints[i].name, name) == 0)
      return i;
  return -1;
}

/* No checkpoint is the view's any more.  Caller holds lock. */
static void
no_view (struct changes *ch) REQUIRES (ch->lock)
{
  unsigned i;

  for (i = 0; i < ch->count; ++i)
    ch->checkpoints[i].view = false;
}

int
changes_create (struct changes *ch, const char *name, bool view)
{
  struct checkpoint *c;
  int err = 0;

  if (!checkpoint_name_valid (name)) {
    errno = EINVAL;
    return -1;
  }
  held_lock (&ch->lock);
  if (!ch->started)
    err = EAGAIN;
  else if (find (ch, name) >= 0)
    err = EEXIST;
  else if (ch->count == CHECKPOINTS_MAX)
    err = EMLINK;
  else if (ch->last_epoch == UINT32_MAX)
    err = EOVERFLOW;
  if (err == 0) {
    if (view)
      no_view (ch);
    c = &ch->checkpoints[ch->count++];
    strcpy (c->name, name);
    c->epoch = ++ch->last_epoch;
    c->id = checkpoint_new_id ();
    c->view = view;
    __atomic_store_n (&ch->current, c->epoch, __ATOMIC_RELEASE);
  }
  held_unlock (&ch->lock);
  errno = err;
  return err ? -1 : 0;
}

/* With no checkpoint left nothing is marked; the marks made stay, all
 * below any epoch taken later.
 */
int
changes_delete (struct changes *ch, const char *name)
{
  int i;

  held_lock (&ch->lock);
  i = find (ch, name);
  if (i >= 0) {
    memmove (&ch->checkpoints[i], &ch->checkpoints[i + 1],
             (ch->count - i - 1) * sizeof ch->checkpoints[0]);
    ch->count--;
    if (ch->count == 0)
      __atomic_store_n (&ch->current, 0, __ATOMIC_RELEASE);
  }
  held_unlock (&ch->lock);
  return found (i);
}

int
changes_since (struct changes *ch, const char *name, uint32_t *since)
{
  struct checkpoint c;

  if (changes_get (ch, name, &c) == -1)
    return -1;
  *since = c.epoch;
  return 0;
}

int
changes_get (struct changes *ch, const char *name, struct checkpoint *out)
{
  int i;

  held_lock (&ch->lock);
  i = find (ch, name);
  if (i >= 0)
    *out = ch->checkpoints[i];
  held_unlock (&ch->lock);
  return found (i);
}

bool
changes_end_view (struct changes *ch, const char *name)
{
  bool was;
  int i;

  held_lock (&ch->lock);
  i = find (ch, name);
  was = i >= 0 && ch->checkpoints[i].view;
  if (was)
    ch->checkpoints[i].view = false;
  held_unlock (&ch->lock);
  return was;
}

bool
changes_view_of (struct changes *ch, char *name)
{
  unsigned i;
  bool any = false;

  held_lock (&ch->lock);
  for (i = 0; i < ch->count && !any; ++i)
    if (ch->checkpoints[i].view) {
      strcpy (name, ch->checkpoints[i].name);
      any = true;
    }
  held_unlock (&ch->lock);
  return any;
}

uint32_t
changes_last_epoch (struct changes *ch)
{
  uint32_t epoch;

  held_lock (&ch->lock);
  epoch = ch->last_epoch;
  held_unlock (&ch->lock);
  return epoch;
}

unsigned
changes_list (struct changes *ch, struct checkpoint *out, uint32_t *last_epoch)
{
  unsigned n;

  held_lock (&ch->lock);
  n = ch->count;
  memcpy (out, ch->checkpoints, n * sizeof *out);
  if (last_epoch)
    *last_epoch = ch->last_epoch;
  held_unlock (&ch->lock);
  return n;
}

uint64_t
changes_run (struct changes *ch, uint64_t b, uint64_t stop, uint32_t since,
             bool *changed)
{
  if (since == 0 || since <= __atomic_load_n (&ch->lost, __ATOMIC_ACQUIRE)) {
    *changed = true;
    return stop;
  }
  *changed = slotmap_get (&ch->marks, b) >= since;
  for (++b; b < stop; ++b)
    if ((slotmap_get (&ch->marks, b) >= since) != *changed)
      break;
  return b;
}
