/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The background fill (fill.h): one thread, which copies a piece of
 * one overlay at a time, the overlays in turn, through the rmw path of
 * the block layer's copy-ups (blk_fill), so a client's write is never
 * overwritten and a client's request waits for at most one piece.
 * It reads through the overlay's shared plugin handles
 * (cow-base-handles), paced by cow-fill-rate.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "baseio.h"
#include "bgthread.h"
#include "checks.h"
#include "clonename.h"
#include "exports.h"
#include "fill.h"
#include "monotonic.h"
#include "overlay.h"
#include "params.h"

/* What the fill copies at a time.  A kept overlay is flushed after
 * each piece, so that a fill cut short reads again at most the piece it
 * was copying.
 */
#define PIECE (4 * 1024 * 1024)

/* How long the thread waits while there is nothing to fill, or the
 * switch of cow-fill=/PATH is off.
 */
#define IDLE_NS (200 * 1000 * 1000)

static struct bgthread thread = BGTHREAD_INIT;
static nbdkit_backend *backend;
static unsigned turn;           /* the thread's: whose turn it is */

const char *
fill_state_name (enum fill_state state)
{
  static const char *const names[] = {
    [FILL_WAITING] = "waiting", [FILL_RUNNING] = "running",
    [FILL_PAUSED] = "paused", [FILL_COMPLETE] = "complete",
    [FILL_FAILED] = "failed",
  };
  return names[state];
}

void
fill_read (const struct fill_progress *from, struct fill_progress *to)
{
  to->state = __atomic_load_n (&from->state, __ATOMIC_ACQUIRE);
  to->offset = __atomic_load_n (&from->offset, __ATOMIC_ACQUIRE);
  to->size = __atomic_load_n (&from->size, __ATOMIC_RELAXED);
  to->started_ns = __atomic_load_n (&from->started_ns, __ATOMIC_RELAXED);
  to->error = __atomic_load_n (&from->error, __ATOMIC_RELAXED);
}

static enum fill_state
state_of (const struct overlay *o)
{
  return __atomic_load_n (&o->fill.state, __ATOMIC_ACQUIRE);
}

static void
set_state (struct overlay *o, enum fill_state state)
{
  __atomic_store_n (&o->fill.state, state, __ATOMIC_RELEASE);
}

/* Whether the fill has work in o. */
static bool
wants_fill (const struct overlay *o) REQUIRES (overlays_lock)
{
  enum fill_state state = state_of (o);

  return o->pool != NULL && !o->ending && o->blk != NULL &&
         blk_is_sized (o->blk) &&
         state != FILL_COMPLETE && state != FILL_FAILED;
}

/* The name of the overlay whose turn it is, or NULL if none wants the
 * fill (or there was no memory).
 */
static char *
next_name (void)
{
  struct overlay *o;
  unsigned n = 0, i = 0;
  char *name = NULL;

  held_lock (&overlays_lock);
  for (o = overlay_list (); o; o = o->next)
    n += wants_fill (o);
  for (o = overlay_list (); o && n > 0; o = o->next)
    if (wants_fill (o) && i++ == turn % n) {
      name = strdup (o->exportname);
      break;
    }
  held_unlock (&overlays_lock);
  turn++;
  return name;
}

/* The fill of o stops with error err. */
static void
fail (struct overlay *o, int err)
{
  nbdkit_error ("cow-fill: export \"%s\": stopped at offset %" PRIu64
                ": %s", o->exportname, o->fill.offset, strerror (err));
  __atomic_store_n (&o->fill.error, err, __ATOMIC_RELAXED);
  set_state (o, FILL_FAILED);
}

/* Fills the next piece of o, pinned.  Returns the bytes filled. */
static uint64_t
fill_piece (struct overlay *o)
{
  char *base = clone_base_name (o->exportname, params.clone_separator);
  struct base_use use;
  struct base_io io;
  uint64_t offset = o->fill.offset, len;
  int err;

  if (base == NULL) {
    fail (o, errno);
    return 0;
  }
  use = basepool_take (o->pool, backend, base, NULL);
  free (base);
  if (use.next == NULL)
    return 0;                   /* said why; a later turn tries again */
  if (baseio_init (&io, use.next, use.call_lock) == -1) {
    fail (o, EIO);
    return 0;
  }
  if (o->fill.started_ns == 0) {
    __atomic_store_n (&o->fill.size, io.size, __ATOMIC_RELAXED);
    __atomic_store_n (&o->fill.started_ns, monotonic_ns (), __ATOMIC_RELAXED);
  }
  set_state (o, FILL_RUNNING);
  len = io.size - offset < PIECE ? io.size - offset : PIECE;
  if (len > 0 && blk_fill (o->blk, &io.blk, len, offset, &err) == -1) {
    fail (o, err);
    return 0;
  }
  __atomic_store_n (&o->fill.offset, offset + len, __ATOMIC_RELEASE);
  if (blk_flush (o->blk, &err) == -1) {
    fail (o, err);
    return len;
  }
  if (offset + len == io.size) {
    nbdkit_debug ("cow-fill: export \"%s\": complete", o->exportname);
    set_state (o, FILL_COMPLETE);
  }
  return len;
}

/* cow-fill=/PATH and PATH is missing: the fills wait. */
static void
pause_all (void)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  for (o = overlay_list (); o; o = o->next)
    if (wants_fill (o))
      set_state (o, FILL_PAUSED);
  held_unlock (&overlays_lock);
}

/* The bgthread_fn: a piece of the overlay whose turn it is, then the
 * pause cow-fill-rate asks for.
 */
static uint64_t
fill_due (uint64_t now, void *opaque)
{
  struct overlay *o;
  uint64_t filled = 0;
  char *name;

  if (!params_switch_on (&params.fill)) {
    pause_all ();
    return now + IDLE_NS;
  }
  name = next_name ();
  if (name == NULL)
    return now + IDLE_NS;
  o = exports_pin (name);
  free (name);
  if (o == NULL)
    return now;
  filled = fill_piece (o);
  exports_unpin (o);
  if (params.fill_rate == 0)
    return now;
  return now + filled * UINT64_C (1000000000) / params.fill_rate;
}

int
fill_start (nbdkit_backend *b)
{
  if (params.fill.mode == SWITCH_OFF)
    return 0;
  backend = b;
  if (bgthread_start (&thread, fill_due, NULL) == -1) {
    nbdkit_error ("cow-fill: cannot start a thread: %m");
    return -1;
  }
  return 0;
}

void
fill_stop (void)
{
  bgthread_stop (&thread);
}
