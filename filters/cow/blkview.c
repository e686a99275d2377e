/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer's point-in-time view (blk.h; docs/design.md,
 * "Point-in-time views").  It is made together with its checkpoint
 * while the gate is closed, and reads as the overlay was at that
 * instant.  When there is no room for what it keeps it breaks, and the
 * places only it kept go back to the filesystem in the background
 * (blkgiveback.c); deleting it does the same.  The writes that keep it
 * are blk.c's.
 */

#include <config.h>

#include <errno.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "blk.h"
#include "blkpriv.h"
#include "checks.h"

/* Makes the view and its checkpoint.  Returns 0, or an errno, the
 * room the store took for it given back.  Caller closed the gate.
 */
static int
make_view (struct blk *blk, const char *name) REQUIRES (blk->gate)
{
  int room, err = 0;

  if (blk_view_state_of (blk) != BLK_VIEW_NONE ||
      __atomic_load_n (&blk->view_places, __ATOMIC_SEQ_CST))
    return EBUSY;
  if ((room = store_begin_places (blk->store, &err)) == -1)
    return err;
  if (blk_checkpoint_create_with_view (blk, name) == -1)
    err = errno;
  else if (blkmap_view_begin (&blk->map) == -1) {
    err = errno;
    blk_checkpoint_delete (blk, name);
  }
  if (err) {
    if (room == 1)
      store_end_places (blk->store);
    return err;
  }
  __atomic_store_n (&blk->view_places, true, __ATOMIC_SEQ_CST);
  __atomic_store_n (&blk->view_room, room == 1, __ATOMIC_SEQ_CST);
  strcpy (blk->view_name, name);
  blk_checkpoint_since (blk, name, &blk->view_epoch);
  __atomic_store_n (&blk->view_kept, 0, __ATOMIC_RELAXED);
  __atomic_store_n (&blk->view_state, BLK_VIEW_LIVE, __ATOMIC_RELEASE);
  return 0;
}

/* A flush with the gate open, before the checkpoint's behind the
 * closed gate: that one then writes only what changed since, and the
 * clients' changes wait for that alone.  Its failure shows in that
 * one.
 */
static void
flush_ahead (struct blk *blk)
{
  int err;

  if (store_flushes (blk->store))
    blk_flush (blk, &err);
}

int
blk_view_create (struct blk *blk, const char *name)
{
  int err;

  if (!store_holds_places (blk->store)) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (!blk_is_sized (blk)) {
    errno = EAGAIN;
    return -1;
  }
  blk_give_back_wait (blk);
  flush_ahead (blk);
  gate_close (&blk->gate);
  err = make_view (blk, name);
  gate_open (&blk->gate);
  errno = err;
  return err ? -1 : 0;
}

/* Gives back to the cap the bytes the view keeps, each byte once
 * whoever else gives them back.
 */
static void
give_back_kept (struct blk *blk)
{
  space_give (blk->space,
              __atomic_exchange_n (&blk->view_kept, 0, __ATOMIC_SEQ_CST));
}

/* Breaks the live view, once: it keeps nothing more, what it kept goes
 * back to the cap (and to the filesystem when it is deleted), and its
 * reads fail from now on.
 */
static void
view_break (struct blk *blk)
{
  int live = BLK_VIEW_LIVE;

  if (!__atomic_compare_exchange_n (&blk->view_state, &live, BLK_VIEW_BROKEN,
                                    false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
    return;
  blkmap_view_end (&blk->map);
  nbdkit_error ("cow: view \"%s\" broken: no room for what it keeps "
                "(cow-max-size, or the overlay's filesystem); its reads "
                "fail until it is deleted", blk->view_name);
  give_back_kept (blk);
}

bool
blk_view_keep (struct blk *blk, uint64_t bytes)
{
  if (blk_view_state_of (blk) != BLK_VIEW_LIVE)
    return false;
  if (!space_take_spare (blk->space, bytes)) {
    view_break (blk);
    return false;
  }
  __atomic_add_fetch (&blk->view_kept, bytes, __ATOMIC_SEQ_CST);
  if (blk_view_state_of (blk) == BLK_VIEW_LIVE)
    return true;
  give_back_kept (blk);          /* it broke meanwhile */
  return false;
}

void
blk_view_unkeep (struct blk *blk, uint64_t bytes)
{
  uint64_t kept = __atomic_load_n (&blk->view_kept, __ATOMIC_SEQ_CST);

  do {
    /* Less than bytes: the view broke and gave them back already. */
    if (kept < bytes || bytes == 0)
      return;
  } while (!__atomic_compare_exchange_n (&blk->view_kept, &kept, kept - bytes,
                                         false, __ATOMIC_SEQ_CST,
                                         __ATOMIC_SEQ_CST));
  space_give (blk->space, bytes);
}

bool
blk_view_break_in_place (struct blk *blk)
{
  if (blk_view_state_of (blk) != BLK_VIEW_LIVE)
    return false;
  view_break (blk);
  return true;
}

bool
blk_view_break_if_keeping (struct blk *blk)
{
  if (blk_view_state_of (blk) != BLK_VIEW_LIVE ||
      __atomic_load_n (&blk->view_kept, __ATOMIC_SEQ_CST) == 0)
    return false;
  view_break (blk);
  return true;
}

/* blk_view_break_if_keeping, or if the store holds room on the
 * filesystem for the view.
 */
static void
break_if_holding_room (struct blk *blk)
{
  if (blk_view_break_if_keeping (blk) ||
      !__atomic_load_n (&blk->view_room, __ATOMIC_SEQ_CST))
    return;
  blk_view_break_in_place (blk);
}

/* Gives back to the filesystem the places only the ended view's
 * records keep, and frees the records, once: in the background if
 * asked and the thread starts (its flush then runs beside the clients'
 * changes, blkgiveback.c), else at once.  Requires the gate closed,
 * and no give-back running.
 */
static void
give_back_places (struct blk *blk, bool in_background) REQUIRES (blk->gate)
{
  if (!__atomic_load_n (&blk->view_places, __ATOMIC_SEQ_CST) ||
      (in_background && blk_give_back_in_background (blk)))
    return;
  blk_give_back_now (blk);
}

/* Ends the view, if any: no more records, what it kept given back to
 * the cap.  Requires the gate closed.
 */
static void
end_view_only (struct blk *blk) REQUIRES (blk->gate)
{
  blkmap_view_end (&blk->map);
  __atomic_store_n (&blk->view_state, BLK_VIEW_NONE, __ATOMIC_RELEASE);
  give_back_kept (blk);
}

/* Whether name is that of a view that ended with the server that made
 * it.  Caller passed or closed the gate.
 */
static bool
ended_with_server (struct blk *blk, const char *name)
{
  char ended[CHECKPOINT_NAME_MAX + 1];

  return blk_view_state_of (blk) == BLK_VIEW_NONE &&
         blk_checkpoint_view_of (blk, ended) && strcmp (ended, name) == 0;
}

/* The view ends with the gate closed, no I/O behind it, and the places
 * it alone kept go back in the background (blkgiveback.c), so that
 * neither the caller nor a client's change waits for them: unless a
 * give-back runs already (a broken view's), which frees its records.
 * Its checkpoint's change is flushed after the gate opens.
 */
int
blk_view_delete (struct blk *blk, const char *name)
{
  bool ended = false;
  int err = 0;

  gate_close (&blk->gate);
  if (ended_with_server (blk, name))
    err = ESTALE;
  else if (blk_view_state_of (blk) == BLK_VIEW_NONE ||
           strcmp (blk->view_name, name) != 0)
    err = ENOENT;
  else {
    ended = blk_checkpoint_end_view (blk, name);
    end_view_only (blk);
    if (!blk_giving_back (blk, NULL))
      give_back_places (blk, true);
  }
  gate_open (&blk->gate);
  if (ended)
    blk_checkpoints_keep (blk);
  errno = err;
  return err ? -1 : 0;
}

/* A give-back under way is stopped first: its records freed, what it
 * did not punch left to the next open of a kept file, while the
 * places of a view still live go back at once.
 */
void
blk_view_end (struct blk *blk)
{
  blk_give_back_stop (blk);
  gate_close (&blk->gate);
  end_view_only (blk);
  give_back_places (blk, false);
  gate_open (&blk->gate);
}

bool
blk_view_give_room (struct blk *blk, uint64_t given_before)
{
  break_if_holding_room (blk);
  blk_view_give_back_broken (blk);
  blk_give_back_wait (blk);
  return blk_view_places_given (blk) != given_before;
}

void
blk_view_give_back_broken (struct blk *blk)
{
  if (!__atomic_load_n (&blk->view_places, __ATOMIC_SEQ_CST) ||
      blk_giving_back (blk, NULL))
    return;
  gate_close (&blk->gate);
  if (blk_view_state_of (blk) == BLK_VIEW_BROKEN && !blk_giving_back (blk, NULL))
    give_back_places (blk, true);
  gate_open (&blk->gate);
}

enum blk_view_state
blk_view_get (struct blk *blk, char *name, uint64_t *kept)
{
  enum blk_view_state state;

  gate_enter (&blk->gate);
  state = blk_view_state_of (blk);
  strcpy (name, state == BLK_VIEW_NONE ? "" : blk->view_name);
  if (state == BLK_VIEW_NONE && blk_checkpoint_view_of (blk, name))
    state = BLK_VIEW_ENDED;
  *kept = __atomic_load_n (&blk->view_kept, __ATOMIC_RELAXED);
  gate_leave (&blk->gate);
  return state;
}

uint32_t
blk_view_epoch (struct blk *blk, const char *name)
{
  uint32_t epoch = 0;

  gate_enter (&blk->gate);
  if (blk_view_state_of (blk) != BLK_VIEW_NONE &&
      strcmp (blk->view_name, name) == 0)
    epoch = blk->view_epoch;
  gate_leave (&blk->gate);
  return epoch;
}

bool
blk_view_giving_back (struct blk *blk, char *name, uint64_t *blocks_left)
{
  bool giving_back;

  gate_enter (&blk->gate);
  giving_back = blk_view_state_of (blk) == BLK_VIEW_NONE &&
                blk_giving_back (blk, blocks_left);
  strcpy (name, giving_back ? blk->view_name : "");
  gate_leave (&blk->gate);
  return giving_back;
}
