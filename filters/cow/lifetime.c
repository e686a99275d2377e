/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the
 * licence.
 */

/* When an overlay ends (lifetime.h): the rule, and the thread that
 * ends overlays whose grace is over (bgthread.h).
 */

#include <config.h>

#include <stdbool.h>
#include <stdint.h>

#include <nbdkit-filter.h>

#include "admission.h"
#include "bgthread.h"
#include "checks.h"
#include "lifetime.h"
#include "monotonic.h"
#include "params.h"

static struct bgthread thread = BGTHREAD_INIT;

static uint64_t discarded GUARDED_BY (overlays_lock);
static uint64_t closed GUARDED_BY (overlays_lock);

/* Whether o may end now: no connection, no reader, and it served none
 * or its grace is over.
 */
static bool
may_end (const struct overlay *o, uint64_t now) REQUIRES (overlays_lock)
{
  CHECK (held_by_me (&overlays_lock));
  if (o->ending || o->connections > 0 || o->pins > 0)
    return false;
  return !o->served || (params.lifetime_clients && o->idle_until <= now);
}

/* Marks o ending if it served no connection and may end. */
static bool
end_unserved (struct overlay *o) REQUIRES (overlays_lock)
{
  if (o->served || !may_end (o, 0))
    return false;
  o->ending = true;
  return true;
}

bool
lifetime_closed (struct overlay *o)
{
  if (o->connections == 0 && params.lifetime_clients) {
    o->idle_until = monotonic_ns () + params.grace_ns;
    bgthread_wake (&thread);
    overlay_idle ();
  }
  return end_unserved (o);
}

/* Whether o, holding a place, could give it back by deadline: ending,
 * or its grace over by then (or, with a connection or a reader, over
 * a grace after they leave now).
 */
static bool
may_end_by (const struct overlay *o, uint64_t now, uint64_t deadline)
  REQUIRES (overlays_lock)
{
  if (o->ending)
    return true;
  if (o->connections > 0 || o->pins > 0)
    return now + params.grace_ns < deadline;
  return o->idle_until < deadline;
}

bool
lifetime_make_place (uint64_t deadline)
{
  uint64_t now = monotonic_ns ();
  struct overlay *o;
  bool soon = false;

  CHECK (held_by_me (&overlays_lock));
  if (!params.lifetime_clients || now >= deadline)
    return false;
  for (o = overlay_list (); o; o = o->next) {
    if (!o->named)
      continue;
    if (may_end (o, now)) {
      o->ending = true;
      held_unlock (&overlays_lock);
      lifetime_end (o);
      held_lock (&overlays_lock);
      return true;
    }
    soon = soon || may_end_by (o, now, deadline);
  }
  if (soon)
    overlay_wait_briefly (10);
  return soon;
}

void
lifetime_pin (struct overlay *o)
{
  o->pins++;
}

bool
lifetime_unpin (struct overlay *o)
{
  CHECK (o->pins > 0);
  o->pins--;
  if (end_unserved (o))
    return true;
  if (may_end (o, monotonic_ns ()))
    bgthread_wake (&thread);
  return false;
}

void
lifetime_end (struct overlay *o)
{
  CHECK (o->ending && o->connections == 0 && o->pins == 0);
  if (blk_free (o->blk) == -1)
    nbdkit_error ("cow: export \"%s\": its kept overlay's flush failed: "
                  "the next open recovers it", o->exportname);
  o->blk = NULL;
  basepool_free (o->pool);
  o->pool = NULL;

  held_lock (&overlays_lock);
  overlay_unlink (o);
  admission_leave (o);
  if (params.cow_file)
    closed++;
  else
    discarded++;
  held_unlock (&overlays_lock);
  nbdkit_debug ("cow: export \"%s\": its overlay %s", o->exportname,
                params.cow_file ? "closed" : "discarded");
  overlay_free (o);
}

void
lifetime_ended (uint64_t *discarded_out, uint64_t *closed_out)
{
  *discarded_out = discarded;
  *closed_out = closed;
}

/* The thread's work: ends the overlays whose grace is over at now, and
 * returns when the next one's is, or UINT64_MAX.
 */
static uint64_t
end_due (uint64_t now, void *opaque)
{
  struct overlay *o, *due = NULL;
  uint64_t next = UINT64_MAX;

  held_lock (&overlays_lock);
  for (o = overlay_list (); o; o = o->next) {
    if (may_end (o, now)) {
      o->ending = true;
      o->next_ending = due;
      due = o;
    }
    else if (!o->ending && o->connections == 0 && o->idle_until > now &&
             o->idle_until < next)
      next = o->idle_until;
  }
  held_unlock (&overlays_lock);

  while (due) {
    o = due;
    due = o->next_ending;
    lifetime_end (o);
  }
  return next;
}

int
lifetime_start (void)
{
  if (!params.lifetime_clients)
    return 0;
  if (bgthread_start (&thread, end_due, NULL) == -1) {
    nbdkit_error ("cow-lifetime: cannot start a thread: %m");
    return -1;
  }
  return 0;
}

void
lifetime_stop (void)
{
  bgthread_stop (&thread);
}
