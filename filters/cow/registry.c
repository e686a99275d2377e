/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The registry of the overlays (registry.h): the list under
 * overlays_lock, admission under cow-max-exports, the rule of when an
 * overlay ends and the thread that ends those whose grace is over
 * (bgthread.h).
 */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nbdkit-filter.h>

#include "bgthread.h"
#include "checks.h"
#include "defaultname.h"
#include "lockranks.h"
#include "monotonic.h"
#include "params.h"
#include "registry.h"
#include "server.h"
#include "statsrecords.h"

/* A new name that finds no place under cow-max-exports waits at most
 * this long for one to come free (cow-lifetime=clients): the client
 * that held it may have hung up a moment before nbdkit closed its
 * connection.
 */
#define PLACE_WAIT_NS UINT64_C (1000000000)

/* Protects the list, the fields of each entry marked below, the counts
 * after it and the default export's name (defaultname.h).  Not an
 * overlay's own fields (registry.h): a connection's handle points to
 * its overlay, which outlives the connection.  Held over nothing
 * slower than the opening of a new kept overlay's file, and never
 * while an overlay ends.
 */
static mutex_t overlays_lock = PTHREAD_MUTEX_INITIALIZER;

/* An overlay and what the registry keeps of it. */
struct entry {
  struct overlay overlay;       /* first: entry_of */

  /* Under overlays_lock: the pool of plugin contexts (with
   * cow-base-handles or cow-fill) and its users (connections reading
   * through it, fill requests); once every block is in the overlay,
   * what its new connections answer of the plugin instead of opening
   * it (set once).  The pool closes when both are set and its last
   * user leaves.
   */
  struct base_pool *pool;
  unsigned pool_users;
  struct base_facts *alone;

  /* Under overlays_lock: the overlay ends only when no connection has
   * it, no one has it pinned, and its grace (idle_until, monotonic ns,
   * set when its last connection closed) is over, or at once if it
   * never served a connection (served: one got past .prepare, or it
   * was made at start).  ending: it is being ended, and a client
   * opening its name waits for a new one.
   */
  bool served;
  bool named;                   /* counted against cow-max-exports */
  unsigned connections;
  unsigned pins;
  uint64_t idle_until;
  bool ending;
  struct entry *next;           /* the list, newest first */
  struct entry *next_ending;    /* a list of entries to end, made under
                                   the lock (end_listed) */
};

/* Under cow-lifetime=clients with cow-file, a kept overlay that ended
 * after serving a client rests in its file until a client opens its
 * name again: the file keeps the name's place under cow-max-exports
 * (unless it is the default export's) and the space it holds against
 * cow-max-size, so that clients asking for ever new names cannot fill
 * the directory.
 */
struct rest {
  struct rest *next;
  uint64_t charge;              /* against cow-max-size */
  bool named;                   /* counted against cow-max-exports */
  char name[];
};

static struct entry *entries GUARDED_BY (overlays_lock);
static unsigned named_entries GUARDED_BY (overlays_lock);
static struct rest *resting GUARDED_BY (overlays_lock);
static unsigned named_resting GUARDED_BY (overlays_lock);
static uint64_t refused_names GUARDED_BY (overlays_lock);
static uint64_t discarded GUARDED_BY (overlays_lock);
static uint64_t closed GUARDED_BY (overlays_lock);
static uint64_t last_id GUARDED_BY (overlays_lock);

/* Signalled when an entry is taken off the list or loses its last
 * connection.
 */
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

/* The thread that ends overlays under cow-lifetime=clients. */
static struct bgthread thread = BGTHREAD_INIT;

static struct entry *
entry_of (const struct overlay *o)
{
  return (struct entry *) o;
}

static struct entry *
find (const char *name) REQUIRES (overlays_lock)
{
  struct entry *e;

  CHECK (held_by_me (&overlays_lock));
  for (e = entries; e; e = e->next)
    if (strcmp (e->overlay.exportname, name) == 0)
      return e;
  return NULL;
}

/* The entry exportname reaches if it is not ending, else NULL. */
static struct entry *
find_alive (const char *exportname) REQUIRES (overlays_lock)
{
  struct entry *e = find (defaultname_overlay_of (exportname));

  return e && !e->ending ? e : NULL;
}

/* The contexts of an overlay's pool: those its connections share
 * (cow-base-handles), else one for the fill alone, else none.
 */
static unsigned
pool_size (void)
{
  if (params.base_handles > 0)
    return params.base_handles;
  return params.fill.mode != SWITCH_OFF;
}

/* Frees e, not on the list, with its pool's contexts; its block layer
 * is freed first, by whoever ends it.
 */
static void
entry_free (struct entry *e)
{
  basepool_free (e->pool);
  baseio_facts_free (e->alone);
  shardctr_free (&e->overlay.requests);
  free (e->overlay.exportname);
  free (e);
}

/* A new entry of name, with its counters, its pool and its block
 * layer, not on the list.  NULL after nbdkit_error.
 */
static struct entry *
entry_new (const char *name) REQUIRES (overlays_lock)
{
  struct entry *e = calloc (1, sizeof *e);

  if (e == NULL || (e->overlay.exportname = strdup (name)) == NULL ||
      shardctr_init (&e->overlay.requests, STATS_EXPORT_COUNTERS) == -1 ||
      (pool_size () && (e->pool = basepool_new (pool_size ())) == NULL)) {
    nbdkit_error ("cow: %m");
    if (e)
      entry_free (e);
    return NULL;
  }
  e->overlay.blk = server_new_blk (name);
  if (e->overlay.blk == NULL) {
    entry_free (e);
    return NULL;
  }
  e->overlay.id = ++last_id;
  return e;
}

/* The place in the list of resting files of name's, or of its end. */
static struct rest **
rest_of (const char *name) REQUIRES (overlays_lock)
{
  struct rest **p;

  for (p = &resting; *p && strcmp ((*p)->name, name) != 0; p = &(*p)->next)
    ;
  return p;
}

/* The kept overlay e, ended, rests in its file holding charge.  Without
 * the memory to remember it, it gives its place and space back.
 */
static void
rest (const struct entry *e, uint64_t charge) REQUIRES (overlays_lock)
{
  size_t len = strlen (e->overlay.exportname) + 1;
  struct rest *r = malloc (sizeof *r + len);

  if (r == NULL)
    return;
  memcpy (r->name, e->overlay.exportname, len);
  r->charge = charge;
  r->named = e->named;
  r->next = resting;
  resting = r;
  named_resting += r->named;
  server_space_charge (charge);
}

/* Name's file, if it rests, is opened again: its new overlay takes its
 * place, and counts its space as it opens.
 */
static void
end_rest (const char *name) REQUIRES (overlays_lock)
{
  struct rest **p = rest_of (name), *r = *p;

  if (r == NULL)
    return;
  *p = r->next;
  named_resting -= r->named;
  server_space_give (r->charge);
  free (r);
}

/* Whether an entry of name, which has none yet, has a place. */
static bool
has_place (const char *name) REQUIRES (overlays_lock)
{
  return defaultname_is (name) || *rest_of (name) != NULL ||
         named_entries + named_resting < params.max_exports - 1;
}

/* Counts and logs the refusal of a name that has no place. */
static void
refuse (void) REQUIRES (overlays_lock)
{
  if (refused_names++ == 0)
    nbdkit_error ("cow-max-exports=%u: a new export name is refused: the "
                  "server %s (the default export and names opened before "
                  "are still served; logged once, cow-stats counts the "
                  "refusals)", params.max_exports,
                  !params.lifetime_clients
                  ? "has made all the overlays it may"
                  : params.cow_file
                  ? "holds as many overlays and files of ended ones as it may"
                  : "holds as many overlays as it may at once");
  else
    nbdkit_debug ("cow-max-exports=%u: a new export name is refused",
                  params.max_exports);
}

/* Puts e, new, on the list, in a place of its own unless it is the
 * default export's.
 */
static void
admit (struct entry *e) REQUIRES (overlays_lock)
{
  e->named = !defaultname_is (e->overlay.exportname);
  if (e->named)
    ++named_entries;
  end_rest (e->overlay.exportname);
  e->next = entries;
  entries = e;
}

/* Takes e off the list, giving its place back, and wakes the clients
 * waiting for an entry to end.
 */
static void
unlink_entry (struct entry *e) REQUIRES (overlays_lock)
{
  struct entry **p;

  for (p = &entries; *p != e; p = &(*p)->next)
    ;
  *p = e->next;
  if (e->named)
    --named_entries;
  pthread_cond_broadcast (&changed);
}

/* Waits until an entry has been taken off the list or lost its last
 * connection, or ms milliseconds have passed.
 */
static void
wait_briefly (unsigned ms) REQUIRES (overlays_lock)
{
  struct timespec until;

  clock_gettime (CLOCK_REALTIME, &until);
  until.tv_nsec += (long) ms * 1000000;
  until.tv_sec += until.tv_nsec / 1000000000;
  until.tv_nsec %= 1000000000;
  pthread_cond_timedwait (&changed, &overlays_lock, &until);
}

/* Whether e may end now: no connection, no pin, and it served none or
 * its grace is over.
 */
static bool
may_end (const struct entry *e, uint64_t now) REQUIRES (overlays_lock)
{
  CHECK (held_by_me (&overlays_lock));
  if (e->ending || e->connections > 0 || e->pins > 0)
    return false;
  return !e->served || (params.lifetime_clients && e->idle_until <= now);
}

/* Marks e ending if it served no connection and may end. */
static bool
end_unserved (struct entry *e) REQUIRES (overlays_lock)
{
  if (e->served || !may_end (e, 0))
    return false;
  e->ending = true;
  return true;
}

/* A connection of e has closed (e->connections counts it no more): the
 * last starts e's grace.  Returns whether e must end now, marked
 * ending: the caller calls end_entry once it has let the lock go.
 */
static bool
connection_closed (struct entry *e) REQUIRES (overlays_lock)
{
  if (e->connections == 0 && params.lifetime_clients) {
    e->idle_until = monotonic_ns () + params.grace_ns;
    bgthread_wake (&thread);
    pthread_cond_broadcast (&changed);
  }
  return end_unserved (e);
}

/* Ends e, marked ending, which no one else touches now: frees its
 * block layer (a throw-away one's space given back, a kept one flushed
 * and closed cleanly) and the plugin contexts it shared, then takes it
 * off the list, waking the clients waiting to open its name.  Called
 * without the lock, the one way an entry ends but at exit.
 */
static void
end_entry (struct entry *e) EXCLUDES (overlays_lock)
{
  bool rests = e->served && params.cow_file && params.lifetime_clients;
  uint64_t charge = rests ? blk_space_charged (e->overlay.blk) : 0;

  CHECK (e->ending && e->connections == 0 && e->pins == 0);
  if (blk_free (e->overlay.blk) == -1)
    nbdkit_error ("cow: export \"%s\": its kept overlay's flush failed: "
                  "the next open recovers it", e->overlay.exportname);
  e->overlay.blk = NULL;
  basepool_free (e->pool);
  e->pool = NULL;

  held_lock (&overlays_lock);
  unlink_entry (e);
  if (rests)
    rest (e, charge);
  if (params.cow_file)
    closed++;
  else
    discarded++;
  held_unlock (&overlays_lock);
  nbdkit_debug ("cow: export \"%s\": its overlay %s", e->overlay.exportname,
                params.cow_file ? "closed" : "discarded");
  entry_free (e);
}

/* Ends every entry of the list through next_ending from e on. */
static void
end_listed (struct entry *e) EXCLUDES (overlays_lock)
{
  struct entry *next;

  for (; e; e = next) {
    next = e->next_ending;
    end_entry (e);
  }
}

/* Lets go of the lock, then ends e if ends says so. */
static void
unlock_and_end (struct entry *e, bool ends) RELEASE (overlays_lock)
{
  held_unlock (&overlays_lock);
  if (ends)
    end_entry (e);
}

/* Whether e, holding a place, could give it back by deadline: ending,
 * or its grace over by then (or, with a connection or a pin, over a
 * grace after they leave now).
 */
static bool
may_end_by (const struct entry *e, uint64_t now, uint64_t deadline)
  REQUIRES (overlays_lock)
{
  if (e->ending)
    return true;
  if (e->connections > 0 || e->pins > 0)
    return now + params.grace_ns < deadline;
  return e->idle_until < deadline;
}

/* Called when a new name finds no place: frees one that comes free by
 * deadline (monotonic_ns), ending an entry past its grace in this
 * thread, or waiting a little for one that ends, or whose grace could
 * end, by then.  Lets go of the lock meanwhile.  Returns whether the
 * caller should look again, false once no place can come free by
 * deadline.
 */
static bool
make_place (uint64_t deadline) REQUIRES (overlays_lock)
{
  uint64_t now = monotonic_ns ();
  struct entry *e;
  bool soon = false;

  if (!params.lifetime_clients || now >= deadline)
    return false;
  for (e = entries; e; e = e->next) {
    if (!e->named)
      continue;
    if (may_end (e, now)) {
      e->ending = true;
      unlock_and_end (e, true);
      held_lock (&overlays_lock);
      return true;
    }
    soon = soon || may_end_by (e, now, deadline);
  }
  if (soon)
    wait_briefly (10);
  return soon;
}

/* The entry named name (an overlay's name: the default export's two
 * names are one, defaultname_overlay_of), made if it is new and has a
 * place; one that is ending is waited for, and made again.  NULL after
 * nbdkit_error.
 */
static struct entry *
get (const char *name) REQUIRES (overlays_lock)
{
  uint64_t deadline = 0;
  struct entry *e;

  for (;;) {
    while ((e = find (name)) != NULL && e->ending)
      pthread_cond_wait (&changed, &overlays_lock);
    if (e)
      return e;
    if (has_place (name))
      break;
    if (deadline == 0)
      deadline = monotonic_ns () + PLACE_WAIT_NS;
    if (!make_place (deadline)) {
      refuse ();
      return NULL;
    }
  }
  e = entry_new (name);
  if (e)
    admit (e);
  return e;
}

int
registry_init (const char *cow_file)
{
  held_rank (&overlays_lock, LOCK_RANK_OVERLAYS);
  return defaultname_load (cow_file);
}

struct overlay *
registry_open (const char *exportname)
{
  struct entry *e;

  held_lock (&overlays_lock);
  e = get (defaultname_overlay_of (exportname));
  if (e)
    e->connections++;
  held_unlock (&overlays_lock);
  return e ? &e->overlay : NULL;
}

struct overlay *
registry_open_alone (const char *exportname, const struct base_facts **alone)
{
  struct entry *e;

  held_lock (&overlays_lock);
  e = find_alive (exportname);
  if (e && e->alone) {
    e->connections++;
    *alone = e->alone;
  }
  else
    e = NULL;
  held_unlock (&overlays_lock);
  return e ? &e->overlay : NULL;
}

void
registry_close (struct overlay *o, bool served)
{
  struct entry *e = entry_of (o);

  held_lock (&overlays_lock);
  CHECK (e->connections > 0);
  e->served |= served;
  e->connections--;
  unlock_and_end (e, connection_closed (e));
}

bool
registry_knows (const char *exportname)
{
  bool alive;

  held_lock (&overlays_lock);
  alive = find_alive (exportname) != NULL;
  held_unlock (&overlays_lock);
  return alive;
}

char *
registry_overlay_name (const char *exportname)
{
  char *name;

  held_lock (&overlays_lock);
  name = strdup (defaultname_overlay_of (exportname));
  held_unlock (&overlays_lock);
  if (name == NULL)
    nbdkit_error ("cow: %m");
  return name;
}

/* Pins e, if there is one. */
static struct overlay *
pin (struct entry *e) REQUIRES (overlays_lock)
{
  if (e == NULL)
    return NULL;
  e->pins++;
  return &e->overlay;
}

struct overlay *
registry_pin (const char *exportname)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = pin (find_alive (exportname));
  held_unlock (&overlays_lock);
  return o;
}

struct overlay *
registry_pin_or_make (const char *exportname)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = pin (find_alive (exportname));
  if (o == NULL)
    o = pin (get (defaultname_overlay_of (exportname)));
  held_unlock (&overlays_lock);
  return o;
}

struct overlay *
registry_pin_id (uint64_t id)
{
  struct entry *e;
  struct overlay *o;

  held_lock (&overlays_lock);
  for (e = entries; e && e->overlay.id != id; e = e->next)
    ;
  o = pin (e && !e->ending ? e : NULL);
  held_unlock (&overlays_lock);
  return o;
}

/* Lets go of a pin of e.  Returns as connection_closed does. */
static bool
unpin (struct entry *e) REQUIRES (overlays_lock)
{
  CHECK (e->pins > 0);
  e->pins--;
  if (end_unserved (e))
    return true;
  if (may_end (e, monotonic_ns ()))
    bgthread_wake (&thread);
  return false;
}

void
registry_unpin (struct overlay *o)
{
  struct entry *e = entry_of (o);

  held_lock (&overlays_lock);
  unlock_and_end (e, unpin (e));
}

struct base_pool *
registry_pool_use (struct overlay *o)
{
  struct entry *e = entry_of (o);
  struct base_pool *pool;

  held_lock (&overlays_lock);
  pool = e->alone ? NULL : e->pool;
  if (pool)
    e->pool_users++;
  held_unlock (&overlays_lock);
  return pool;
}

void
registry_pool_done (struct overlay *o)
{
  struct entry *e = entry_of (o);
  struct base_pool *closing = NULL;

  held_lock (&overlays_lock);
  CHECK (e->pool_users > 0);
  if (--e->pool_users == 0 && e->alone) {
    closing = e->pool;
    e->pool = NULL;
  }
  held_unlock (&overlays_lock);
  if (closing) {
    nbdkit_debug ("cow: export \"%s\" stands alone: its plugin handles "
                  "close", o->exportname);
    basepool_free (closing);
  }
}

void
registry_stand_alone (struct overlay *o, struct base_facts *facts)
{
  struct entry *e = entry_of (o);

  held_lock (&overlays_lock);
  if (e->alone == NULL) {
    e->alone = facts;
    facts = NULL;
  }
  held_unlock (&overlays_lock);
  baseio_facts_free (facts);
}

const struct base_facts *
registry_alone (struct overlay *o)
{
  const struct base_facts *alone;

  held_lock (&overlays_lock);
  alone = entry_of (o)->alone;
  held_unlock (&overlays_lock);
  return alone;
}

void
registry_learn_default (const char *name)
{
  struct entry *e;

  held_lock (&overlays_lock);
  e = find (name);
  defaultname_learn (name, e && !e->ending);
  held_unlock (&overlays_lock);
}

bool
registry_is_default (const struct overlay *o)
{
  bool is_default;

  held_lock (&overlays_lock);
  is_default = defaultname_is (o->exportname);
  held_unlock (&overlays_lock);
  return is_default;
}

/* The entry of name made at start: served, its grace started. */
static struct overlay *
start (const char *name) REQUIRES (overlays_lock)
{
  struct entry *e = get (name);

  if (e == NULL)
    return NULL;
  e->served = true;
  connection_closed (e);
  return &e->overlay;
}

struct overlay *
registry_start_default (void)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = start (defaultname_overlay ());
  held_unlock (&overlays_lock);
  return o;
}

struct overlay *
registry_start_named (const char *name)
{
  struct overlay *o = NULL;

  held_lock (&overlays_lock);
  if (find (name) == NULL && has_place (name))
    o = start (name);
  held_unlock (&overlays_lock);
  return o;
}

/* Whether the fill wants e. */
static bool
wanted (const struct entry *e, registry_wants *wants) REQUIRES (overlays_lock)
{
  return e->pool != NULL && !e->ending && wants (&e->overlay);
}

struct overlay *
registry_pin_turn (unsigned turn, registry_wants *wants)
{
  struct entry *e;
  unsigned n = 0, i = 0;
  struct overlay *o = NULL;

  held_lock (&overlays_lock);
  for (e = entries; e; e = e->next)
    n += wanted (e, wants);
  for (e = entries; e && n > 0; e = e->next)
    if (wanted (e, wants) && i++ == turn % n) {
      o = pin (e);
      break;
    }
  held_unlock (&overlays_lock);
  return o;
}

void
registry_each_wanted (registry_wants *wants, void (*fn) (struct overlay *o))
{
  struct entry *e;

  held_lock (&overlays_lock);
  for (e = entries; e; e = e->next)
    if (wanted (e, wants))
      fn (&e->overlay);
  held_unlock (&overlays_lock);
}

int
registry_pin_all (struct registry_view *view)
{
  struct entry *e;
  size_t max = 0, i;

  held_lock (&overlays_lock);
  for (e = entries; e; e = e->next)
    max += !e->ending;
  view->overlays = calloc (max ? max : 1, sizeof *view->overlays);
  view->connections = calloc (max ? max : 1, sizeof *view->connections);
  view->n = 0;
  if (view->overlays && view->connections)
    /* Newest first on the list: the view is filled from its end. */
    for (e = entries, i = max; e; e = e->next)
      if (!e->ending) {
        --i;
        view->overlays[i] = pin (e);
        view->connections[i] = e->connections;
      }
  if (view->overlays && view->connections)
    view->n = max;
  view->refused_names = refused_names;
  view->discarded = discarded;
  view->closed = closed;
  held_unlock (&overlays_lock);
  if (view->n != max) {
    free (view->overlays);
    free (view->connections);
    view->overlays = NULL;
    view->connections = NULL;
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

void
registry_unpin_all (struct registry_view *view)
{
  struct entry *ending = NULL, *e;
  size_t i;

  held_lock (&overlays_lock);
  for (i = 0; i < view->n; ++i) {
    e = entry_of (view->overlays[i]);
    if (unpin (e)) {
      e->next_ending = ending;
      ending = e;
    }
  }
  held_unlock (&overlays_lock);
  end_listed (ending);
  free (view->overlays);
  free (view->connections);
  view->overlays = NULL;
  view->connections = NULL;
  view->n = 0;
}

/* The thread's work: ends the entries whose grace is over at now, and
 * returns when the next one's is, or UINT64_MAX.
 */
static uint64_t
end_due (uint64_t now, void *opaque)
{
  struct entry *e, *due = NULL;
  uint64_t next = UINT64_MAX;

  held_lock (&overlays_lock);
  for (e = entries; e; e = e->next) {
    if (may_end (e, now)) {
      e->ending = true;
      e->next_ending = due;
      due = e;
    }
    else if (!e->ending && e->connections == 0 && e->idle_until > now &&
             e->idle_until < next)
      next = e->idle_until;
  }
  held_unlock (&overlays_lock);
  end_listed (due);
  return next;
}

int
registry_start_thread (void)
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
registry_stop_thread (void)
{
  bgthread_stop (&thread);
}

void
registry_close_pools (void)
{
  struct entry *e;

  /* The list no longer changes: the contexts are finalized after the
   * lock is let go, as it is held over nothing slower.
   */
  held_lock (&overlays_lock);
  e = entries;
  held_unlock (&overlays_lock);
  for (; e; e = e->next) {
    basepool_free (e->pool);
    e->pool = NULL;
  }
}

int
registry_free (void)
{
  struct entry *e;
  int r = 0;

  for (;;) {
    held_lock (&overlays_lock);
    e = entries;
    if (e)
      unlink_entry (e);
    held_unlock (&overlays_lock);
    if (e == NULL)
      break;
    if (blk_free (e->overlay.blk) == -1)
      r = -1;
    entry_free (e);
  }
  held_lock (&overlays_lock);
  while (resting)
    end_rest (resting->name);
  held_unlock (&overlays_lock);
  defaultname_free ();
  return r;
}
