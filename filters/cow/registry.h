/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The registry of the overlays, one per export name: the one unit that
 * takes overlays_lock, and the one place an overlay is made, admitted,
 * counted in, pinned, let go and ended.
 *
 * An overlay is made when a client first opens its name, if cow-max-
 * exports=N has a place for it: at most N overlays at once, one place
 * kept for the default export's, so that a client sending names cannot
 * exhaust the server (past that a new name is refused, the first
 * refusal logged as an error and every one counted).  The default
 * export's two names reach one overlay (defaultname.h).
 *
 * An overlay ends by default at nbdkit's exit; under
 * cow-lifetime=clients, once its last connection has closed and the
 * grace has passed with none opening it again (a throw-away overlay is
 * then discarded, a kept one closed cleanly, to be opened again by the
 * next client of its name), by a thread of the registry's own.
 * Whatever the lifetime, an overlay that served no connection ends
 * with its last user, so that a refused name keeps nothing: no place,
 * descriptor, lock or space.  No overlay ends while it is pinned: read
 * by the statistics, the fill or the control socket.
 */

#ifndef COW_REGISTRY_H
#define COW_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "baseio.h"
#include "basepool.h"
#include "blk.h"
#include "fillprogress.h"
#include "shardctr.h"

/* What the registry shows of an overlay: the rest (its connections,
 * pins, grace, pool) is the registry's own, under its lock.
 */
struct overlay {
  /* Set once, before the registry lists the overlay. */
  char *exportname;             /* "" for the default export */
  uint64_t id;                  /* unique in this run */
  struct blk *blk;

  /* Counted into without a lock. */
  struct shardctr requests;     /* statsrecords.h: requests, plugin opens */
  struct fill_progress fill;    /* cow-fill: the fill's (atomic) */
};

/* .get_ready, before any other call: with cow-file=cow_file (or
 * NULL), the default export's name recorded on it.  Returns 0, or -1
 * after nbdkit_error.
 */
extern int registry_init (const char *cow_file);

/* The overlay of exportname, as nbdkit hands it to .open, for a new
 * connection, counted in its connections: made if the name is new and
 * has a place (waiting for one ending under the name, and up to a
 * second for a place to come free).  NULL after nbdkit_error if the
 * name is refused or its overlay cannot be made.
 */
extern struct overlay *registry_open (const char *exportname);

/* registry_open, but only an overlay that stands alone
 * (registry_stand_alone): sets *alone to its facts.  Else NULL.
 */
extern struct overlay *registry_open_alone (const char *exportname,
                                            const struct base_facts **alone);

/* A connection of o has closed, served (it got past .prepare) or not;
 * the last may end o.
 */
extern void registry_close (struct overlay *o, bool served);

/* Whether exportname reaches an overlay that is not ending. */
extern bool registry_knows (const char *exportname);

/* The name of the overlay exportname reaches: the default export's
 * for the default export's name, once known.  The caller frees it.
 * NULL after nbdkit_error.
 */
extern char *registry_overlay_name (const char *exportname);

/* The overlay exportname reaches, if it has one that is not ending,
 * pinned: it does not end until registry_unpin.  Else NULL.
 */
extern struct overlay *registry_pin (const char *exportname);

/* registry_pin, but an export with no overlay is given one if it has
 * a place, pinned, that ends as the pin goes if no client opens it.
 * NULL if it has no place, or after nbdkit_error.
 */
extern struct overlay *registry_pin_or_make (const char *exportname);

/* The overlay of id, if it is not ending, pinned; else NULL. */
extern struct overlay *registry_pin_id (uint64_t id);

extern void registry_unpin (struct overlay *o);

/* The overlay's pool of plugin contexts for one more user, pinned or
 * connected, or NULL if the overlay has none or stands alone.  Each
 * use ends with registry_pool_done.
 */
extern struct base_pool *registry_pool_use (struct overlay *o);
extern void registry_pool_done (struct overlay *o);

/* Every block of o is in it: its new connections open no context and
 * answer facts (taken), and its pool closes when its last user leaves.
 */
extern void registry_stand_alone (struct overlay *o, struct base_facts *facts);

/* The facts o answers if it stands alone, else NULL. */
extern const struct base_facts *registry_alone (struct overlay *o);

/* A client asked for "", which the plugin names name (defaultname.h). */
extern void registry_learn_default (const char *name);

/* Whether o is the default export's overlay. */
extern bool registry_is_default (const struct overlay *o);

/* The overlay of the default export, or of the named export name if it
 * has none and has a place, made at start before any client, as if a
 * client had just left it: its grace starts now.  NULL if name has an
 * overlay or no place, or after nbdkit_error.
 */
extern struct overlay *registry_start_default (void);
extern struct overlay *registry_start_named (const char *name);

/* Whether the fill wants o, called under the registry's lock for the
 * overlays that read their base through a pool and are not ending: it
 * takes no lock and does no I/O.
 */
typedef bool registry_wants (const struct overlay *o);

/* Of the overlays the fill wants, the one of turn (counted modulo
 * their number), pinned; NULL if it wants none.
 */
extern struct overlay *registry_pin_turn (unsigned turn,
                                          registry_wants *wants);

/* Calls fn (o) for every overlay the fill wants, under the registry's
 * lock: fn takes no lock and does no I/O.
 */
extern void registry_each_wanted (registry_wants *wants,
                                  void (*fn) (struct overlay *o));

/* The overlays not ending, oldest first, each pinned, with the
 * connections each had then, and the registry's counts.
 */
struct registry_view {
  struct overlay **overlays;
  unsigned *connections;
  size_t n;
  uint64_t refused_names;       /* new names refused (cow-max-exports) */
  uint64_t discarded, closed;   /* overlays ended, throw-away and kept */
};

/* Fills *view.  Returns 0, or -1 with errno set (no memory): then
 * view->n is 0.  Each call ends with registry_unpin_all.
 */
extern int registry_pin_all (struct registry_view *view);
extern void registry_unpin_all (struct registry_view *view);

/* Starts the thread that ends overlays under cow-lifetime=clients
 * (after nbdkit has forked), and stops it, if it runs.
 * registry_start_thread returns 0, or -1 after nbdkit_error.
 */
extern int registry_start_thread (void);
extern void registry_stop_thread (void);

/* .cleanup: closes the plugin contexts the overlays share (the thread
 * has stopped, no connection is left).
 */
extern void registry_close_pools (void);

/* Ends every overlay, flushing the kept ones.  Returns 0, or -1 if a
 * kept overlay's last flush failed.
 */
extern int registry_free (void);

#endif /* COW_REGISTRY_H */
