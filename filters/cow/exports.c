/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The overlays of the exports (exports.h). */

#include <config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "checks.h"
#include "defaultname.h"
#include "exports.h"
#include "keptname.h"
#include "monotonic.h"
#include "params.h"
#include "space.h"
#include "stripes.h"
#include "tempfiles.h"

/* The disk space of every overlay, counted against cow-max-size. */
static struct space space;

/* The files of the throw-away overlays, made by exports_init; NULL
 * with cow-file.
 */
static struct temp_files *temp_files;

/* Protects the list of overlays, each overlay's connections, pins,
 * grace and ending, and the facts of the names below; not the rest of
 * an overlay: each connection's handle points to its overlay, which
 * outlives the connection.  Taken when a client opens or closes an
 * export or asks for the default one, by the statistics to pin the
 * overlays they read, and by the thread ending overlays to pick and
 * unlink them; a new kept overlay's file is opened holding it.  Held
 * over nothing slower, and never while an overlay ends.
 */
static mutex_t overlays_lock = PTHREAD_MUTEX_INITIALIZER;
static struct overlay *overlays GUARDED_BY (overlays_lock);
/* Those made not as the default export's. */
static unsigned named_overlays GUARDED_BY (overlays_lock);
/* Opens of new names refused. */
static uint64_t refused_names GUARDED_BY (overlays_lock);
/* Overlays ended: throw-away, kept. */
static uint64_t discarded GUARDED_BY (overlays_lock);
static uint64_t closed GUARDED_BY (overlays_lock);
/* Signalled when an overlay has ended, for clients waiting to open its
 * name again.
 */
static pthread_cond_t overlay_ended = PTHREAD_COND_INITIALIZER;

static struct blk *
new_blk (const char *exportname)
{
  struct blk *blk;
  char *path;

  if (params.cow_file == NULL)
    return blk_new (params.block_size, params.stripes, temp_files, &space);
  path = kept_file_name (params.cow_file, exportname);
  if (path == NULL) {
    nbdkit_error ("cow: %m");
    return NULL;
  }
  blk = blk_new_kept (params.block_size, params.stripes, path, exportname,
                      &space);
  free (path);
  return blk;
}

/* Whether a name with no overlay yet is refused, the server having
 * made all the overlays cow-max-exports allows; the first refusal is
 * logged as an error, the others only counted, so that a client
 * sending names cannot fill the log.  The default export's overlay
 * always has room.
 */
static bool
new_name_refused (const char *exportname) REQUIRES (overlays_lock)
{
  CHECK (held_by_me (&overlays_lock));
  if (strcmp (exportname, defaultname_overlay ()) == 0 ||
      named_overlays < params.max_exports - 1)
    return false;
  if (refused_names++ == 0)
    nbdkit_error ("cow-max-exports=%u: a new export name is refused: the "
                  "server %s (the default export and names opened before "
                  "are still served; logged once, cow-stats counts the "
                  "refusals)", params.max_exports,
                  params.lifetime_clients
                  ? "holds as many overlays as it may at once"
                  : "has made all the overlays it may");
  else
    nbdkit_debug ("cow-max-exports=%u: a new export name is refused",
                  params.max_exports);
  return true;
}

static struct overlay *
find_overlay (const char *name) REQUIRES (overlays_lock)
{
  struct overlay *o;

  CHECK (held_by_me (&overlays_lock));
  for (o = overlays; o; o = o->next)
    if (strcmp (o->exportname, name) == 0)
      return o;
  return NULL;
}

/* The name of the overlay of exportname (defaultname.h).
 */
static const char *
overlay_name (const char *exportname) REQUIRES (overlays_lock)
{
  CHECK (held_by_me (&overlays_lock));
  return defaultname_overlay_of (exportname);
}

static void
free_overlay (struct overlay *o)
{
  basepool_free (o->pool);
  shardctr_free (&o->requests);
  free (o->exportname);
  free (o);
}

/* The overlay of exportname, made if it is new and not refused; one
 * that is ending is waited for, and made again.
 */
static struct overlay *
get_overlay (const char *exportname) REQUIRES (overlays_lock)
{
  struct overlay *o;

  exportname = overlay_name (exportname);
  while ((o = find_overlay (exportname)) != NULL && o->ending)
    pthread_cond_wait (&overlay_ended, &overlays_lock);
  if (o)
    return o;
  if (new_name_refused (exportname))
    return NULL;

  o = calloc (1, sizeof *o);
  if (o == NULL || (o->exportname = strdup (exportname)) == NULL ||
      shardctr_init (&o->requests, STATS_EXPORT_COUNTERS) == -1 ||
      (params.base_handles &&
       (o->pool = basepool_new (params.base_handles)) == NULL)) {
    nbdkit_error ("cow: %m");
    if (o)
      free_overlay (o);
    return NULL;
  }
  o->blk = new_blk (exportname);
  if (o->blk == NULL) {
    free_overlay (o);
    return NULL;
  }
  o->next = overlays;
  overlays = o;
  o->named = strcmp (exportname, defaultname_overlay ()) != 0;
  if (o->named)
    ++named_overlays;
  return o;
}

struct overlay *
exports_open (const char *exportname)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = get_overlay (exportname);
  if (o)
    o->connections++;
  held_unlock (&overlays_lock);
  return o;
}

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

/* Marks o ending if it served no connection and may end: the caller
 * ends it once it lets the lock go.
 */
static bool
end_unserved (struct overlay *o) REQUIRES (overlays_lock)
{
  if (o->served || !may_end (o, 0))
    return false;
  o->ending = true;
  return true;
}

static void end_overlay (struct overlay *o);

void
exports_close (struct overlay *o, bool served)
{
  bool unserved;

  held_lock (&overlays_lock);
  CHECK (o->connections > 0);
  o->served |= served;
  if (--o->connections == 0 && params.lifetime_clients) {
    o->idle_until = monotonic_ns () + params.grace_ns;
    lifetime_wake ();
  }
  unserved = end_unserved (o);
  held_unlock (&overlays_lock);
  if (unserved)
    end_overlay (o);
}

bool
exports_known (const char *exportname)
{
  struct overlay *o;
  bool known;

  held_lock (&overlays_lock);
  o = find_overlay (overlay_name (exportname));
  known = o && !o->ending;
  held_unlock (&overlays_lock);
  return known;
}

void
exports_learn_default (const char *name)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = find_overlay (name);
  defaultname_learn (name, o && !o->ending);
  held_unlock (&overlays_lock);
}

bool
exports_is_default (const struct overlay *o)
{
  bool is_default;

  held_lock (&overlays_lock);
  is_default = strcmp (o->exportname, defaultname_overlay ()) == 0;
  held_unlock (&overlays_lock);
  return is_default;
}

int
exports_init (void)
{
  const char *tmpdir = getenv ("TMPDIR");
  struct overlay *o;

  space_init (&space, params.max_size);
  if (defaultname_load (params.cow_file) == -1)
    return -1;
  if (params.cow_file == NULL) {
    temp_files = temp_files_new (tmpdir ? tmpdir : "/var/tmp",
                                 params.stripes,
                                 stripes_chunk_shift (__builtin_ctz (params.block_size)));
    return temp_files ? 0 : -1;
  }
  o = exports_open (defaultname_overlay ());
  if (o == NULL)
    return -1;
  exports_close (o, true);      /* its grace starts now */
  return 0;
}

/* Ends o, marked ending, which no one else touches now: frees its
 * overlay (a throw-away one's slots and space given back, a kept one
 * flushed and closed cleanly), closes the plugin contexts it shared,
 * then takes it off the list and wakes the clients waiting to open its
 * name.
 */
static void
end_overlay (struct overlay *o)
{
  struct overlay **p;

  CHECK (o->ending && o->connections == 0 && o->pins == 0);
  if (blk_free (o->blk) == -1)
    nbdkit_error ("cow: export \"%s\": its kept overlay's flush failed: "
                  "the next open recovers it", o->exportname);
  o->blk = NULL;
  basepool_free (o->pool);
  o->pool = NULL;

  held_lock (&overlays_lock);
  for (p = &overlays; *p != o; p = &(*p)->next)
    ;
  *p = o->next;
  if (o->named)
    --named_overlays;
  if (params.cow_file)
    closed++;
  else
    discarded++;
  pthread_cond_broadcast (&overlay_ended);
  held_unlock (&overlays_lock);
  nbdkit_debug ("cow: export \"%s\": its overlay %s", o->exportname,
                params.cow_file ? "closed" : "discarded");
  free_overlay (o);
}

uint64_t
exports_end_due (uint64_t now)
{
  struct overlay *o, *due = NULL;
  uint64_t next = UINT64_MAX;

  held_lock (&overlays_lock);
  for (o = overlays; o; o = o->next) {
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
    end_overlay (o);
  }
  return next;
}

/* Pins the overlays that are not ending into pinned[], oldest first,
 * and returns how many (at most max).
 */
static size_t
pin_overlays (struct overlay **pinned, size_t max) REQUIRES (overlays_lock)
{
  struct overlay *o;
  size_t n = 0, i;

  CHECK (held_by_me (&overlays_lock));
  for (o = overlays; o && n < max; o = o->next)
    if (!o->ending) {
      o->pins++;
      pinned[n++] = o;
    }
  for (i = 0; i < n / 2; ++i) {
    o = pinned[i];
    pinned[i] = pinned[n - 1 - i];
    pinned[n - 1 - i] = o;
  }
  return n;
}

/* Unpins the overlays of pin_overlays, and ends those that served no
 * connection and may end now: pinned, they could not.  Reuses pinned.
 */
static void
unpin_overlays (struct overlay **pinned, size_t n)
{
  bool wake = false;
  size_t i, unserved = 0;

  held_lock (&overlays_lock);
  for (i = 0; i < n; ++i) {
    pinned[i]->pins--;
    if (end_unserved (pinned[i]))
      pinned[unserved++] = pinned[i];
    else
      wake |= may_end (pinned[i], monotonic_ns ());
  }
  if (wake)
    lifetime_wake ();
  held_unlock (&overlays_lock);
  for (i = 0; i < unserved; ++i)
    end_overlay (pinned[i]);
}

/* The statistics of every overlay not ending, oldest first, each
 * pinned while it is read, so that none ends under the walk.
 */
int
exports_gather (struct export_stats **exports, size_t *n,
                struct server_stats *server)
{
  struct overlay **pinned, *o;
  size_t max = 0, i;

  held_lock (&overlays_lock);
  for (o = overlays; o; o = o->next)
    max++;
  pinned = calloc (max ? max : 1, sizeof *pinned);
  *exports = calloc (max ? max : 1, sizeof **exports);
  *n = 0;
  if (pinned && *exports)
    *n = pin_overlays (pinned, max);
  for (i = 0; i < *n; ++i)
    (*exports)[i].connections = pinned[i]->connections;
  server->refused_names = refused_names;
  server->alive = *n;
  server->discarded = discarded;
  server->closed = closed;
  held_unlock (&overlays_lock);
  if (pinned == NULL || *exports == NULL) {
    free (pinned);
    return -1;
  }

  for (i = 0; i < *n; ++i) {
    struct export_stats *e = &(*exports)[i];

    o = pinned[i];
    e->name = strdup (o->exportname);
    blk_get_stats (o->blk, &e->blk);
    stats_sum_counters (&o->requests, e);
  }
  unpin_overlays (pinned, *n);
  free (pinned);
  for (i = 0; i < *n; ++i)
    if ((*exports)[i].name == NULL)
      return -1;
  return 0;
}

/* No connection is left and the thread that ends overlays has
 * stopped, so the list no longer changes: the contexts are finalized
 * after overlays_lock is let go, as it is held over nothing slower.
 */
void
exports_close_bases (void)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = overlays;
  held_unlock (&overlays_lock);
  for (; o; o = o->next) {
    basepool_free (o->pool);
    o->pool = NULL;
  }
}

/* Runs alone, at unload, every other thread of the filter stopped:
 * no lock, and none over the overlays' slow ends.
 */
int
exports_free (void) NO_TSA
{
  int r = 0;

  if (temp_files)
    temp_files_exiting (temp_files);
  while (overlays) {
    struct overlay *o = overlays;
    overlays = o->next;
    if (blk_free (o->blk) == -1)
      r = -1;
    free_overlay (o);
  }
  temp_files_free (temp_files);
  defaultname_free ();
  return r;
}
