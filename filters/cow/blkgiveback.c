/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The give-back of an ended view's places (blkpriv.h; docs/design.md,
 * "Giving the places back"): once a flush made a kept store's map on
 * disk name none of them, the units only its records keep punched,
 * block by block under each block's rmw lock with the gate open, then
 * the records freed with it closed.  After a deletion or a break the
 * overlay's own thread does it in the background (common/bgthread.c),
 * so that neither the deletion nor any client's change waits for it;
 * at the overlay's end it is done at once, or stopped and left to the
 * next open of a kept file.
 */

#include <config.h>

#include <errno.h>
#include <pthread.h>

#include <nbdkit-filter.h>

#include "blkheld.h"
#include "blkpriv.h"
#include "blkstore.h"
#include "checks.h"

int
blk_give_back_init (struct blk *blk)
{
  int err = pthread_cond_init (&blk->give_back_ended, NULL);

  if (err) {
    errno = err;
    return -1;
  }
  held_init (&blk->give_back_lock, CHECKS_RANK_LEAF);
  blk->give_back_thread = (struct bgthread) BGTHREAD_INIT;
  return 0;
}

void
blk_give_back_destroy (struct blk *blk)
{
  held_destroy (&blk->give_back_lock);
  pthread_cond_destroy (&blk->give_back_ended);
}

/* Punches the units block b's record keeps in places b no longer
 * holds them in, under b's rmw lock.  Returns -1 (stopping the walk)
 * once the overlay's end asked the give-back to stop.
 */
static int
punch_kept (uint64_t b, void *opaque)
{
  struct blk *blk = opaque;
  struct blkmap_held now, kept;
  struct rangelock_range held;
  unsigned place;

  if (__atomic_load_n (&blk->give_back_stop, __ATOMIC_SEQ_CST))
    return -1;
  blk_lock_rmw (blk, &held, b, 1);
  blkmap_get_held (&blk->map, b, true, &kept);
  blkmap_get_held (&blk->map, b, false, &now);
  for (place = 0; place <= 1; ++place) {
    uint32_t kept_there = kept.units & (place ? kept.where : ~kept.where);
    uint32_t held_there = now.units & (place ? now.where : ~now.where);

    blk_punch_units (blk, b, place, kept_there & ~held_there);
  }
  blk_unlock_rmw (blk, &held);
  __atomic_store_n (&blk->give_back_left,
                    blockgeom_blocks (&blk->map.geom) - b - 1,
                    __ATOMIC_RELAXED);
  return 0;
}

/* Punches the places, block by block: every change of where a block's
 * units are holds its rmw lock, and a write into units held changes
 * nothing this reads, so a client's change waits for one block's
 * punch at most.  The ended view's records stay as they are meanwhile
 * (nothing makes or frees them but the give-back).  Returns whether it
 * punched them all.
 */
static bool
punch_places (struct blk *blk)
{
  __atomic_store_n (&blk->give_back_left, blockgeom_blocks (&blk->map.geom),
                    __ATOMIC_RELAXED);
  return blkmap_each_record (&blk->map, punch_kept, blk) == 0;
}

void
blk_give_back_free (struct blk *blk, bool punched)
{
  if (!__atomic_load_n (&blk->view_places, __ATOMIC_SEQ_CST))
    return;
  if (punched &&
      __atomic_exchange_n (&blk->view_room, false, __ATOMIC_SEQ_CST))
    store_end_places (blk->store);
  blkmap_view_free (&blk->map);
  __atomic_store_n (&blk->view_places, false, __ATOMIC_SEQ_CST);
  __atomic_add_fetch (&blk->view_places_given, 1, __ATOMIC_SEQ_CST);
}

/* Whether a flush made a kept store's records on disk name none of the
 * places to punch (if it fails, they stay until the file next opens).
 * In the background it runs beside the clients' changes, and may:
 * once the view ended no change
 * moves a unit to the other place, and every move made while it lived
 * was in the map before the gate opened, so a flush that starts after
 * writes them all.
 */
static bool
flushed (struct blk *blk)
{
  int err;

  return blk_flush (blk, &err) == 0;
}

void
blk_give_back_now (struct blk *blk)
{
  blk_give_back_free (blk, flushed (blk) && punch_places (blk));
}

/* The bgthread_fn of the overlay's give-back: gives back the places
 * handed to it, if any, then waits to be woken.
 */
static uint64_t
give_back_due (uint64_t now, void *opaque)
{
  struct blk *blk = opaque;
  bool due, punched;

  (void) now;
  held_lock (&blk->give_back_lock);
  due = blk->giving_back;
  held_unlock (&blk->give_back_lock);
  if (!due)
    return UINT64_MAX;
  punched = flushed (blk) && punch_places (blk);
  gate_close (&blk->gate);
  blk_give_back_free (blk, punched);
  gate_open (&blk->gate);
  held_lock (&blk->give_back_lock);
  blk->giving_back = false;
  pthread_cond_broadcast (&blk->give_back_ended);
  held_unlock (&blk->give_back_lock);
  return UINT64_MAX;
}

bool
blk_give_back_in_background (struct blk *blk)
{
  bool started;

  held_lock (&blk->give_back_lock);
  blk->giving_back = true;
  held_unlock (&blk->give_back_lock);
  if (blk->give_back_started) {
    bgthread_wake (&blk->give_back_thread);
    return true;
  }
  started = bgthread_start (&blk->give_back_thread, give_back_due, blk) == 0;
  if (!started) {
    nbdkit_error ("cow: cannot start the thread giving back a view's "
                  "places (%m): they go back at once");
    held_lock (&blk->give_back_lock);
    blk->giving_back = false;
    held_unlock (&blk->give_back_lock);
  }
  blk->give_back_started = started;
  return started;
}

bool
blk_giving_back (struct blk *blk, uint64_t *blocks_left)
{
  bool giving_back;

  held_lock (&blk->give_back_lock);
  giving_back = blk->giving_back;
  held_unlock (&blk->give_back_lock);
  if (blocks_left)
    *blocks_left = giving_back
      ? __atomic_load_n (&blk->give_back_left, __ATOMIC_RELAXED) : 0;
  return giving_back;
}

void
blk_give_back_wait (struct blk *blk)
{
  held_lock (&blk->give_back_lock);
  while (blk->giving_back)
    pthread_cond_wait (&blk->give_back_ended, &blk->give_back_lock);
  held_unlock (&blk->give_back_lock);
}

void
blk_give_back_stop (struct blk *blk)
{
  __atomic_store_n (&blk->give_back_stop, true, __ATOMIC_SEQ_CST);
  bgthread_stop (&blk->give_back_thread);
  __atomic_store_n (&blk->give_back_stop, false, __ATOMIC_SEQ_CST);
}
