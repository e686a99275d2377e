/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the
 * licence.
 */

/* The overlays of the server, one per export name, in one list under
 * overlays_lock.  This unit owns the list and the lock; the units above
 * make and connect overlays (exports.c), admit new names
 * (admission.c), end overlays (lifetime.c) and read them for the
 * statistics (gather.c).
 */

#ifndef COW_OVERLAY_H
#define COW_OVERLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "basepool.h"
#include "blk.h"
#include "fill.h"
#include "shardctr.h"
#include "tsa.h"

struct base_facts;

struct overlay {
  char *exportname;             /* "" for the default export */
  struct blk *blk;
  struct shardctr requests;     /* stats.h: requests, plugin opens */
  struct base_pool *pool;       /* with cow-base-handles or cow-fill */
  struct fill_progress fill;    /* cow-fill: the fill thread's (fill.h) */

  /* Under overlays_lock: the users of pool (connections reading
   * through it, fill requests), and, once the fill is complete, what
   * the overlay's new connections answer of the plugin instead of
   * opening it (set once).  The pool closes when both are set and its
   * last user leaves (exports.h).
   */
  unsigned pool_users;
  struct base_facts *alone;

  /* Under overlays_lock: the overlay ends only when no connection has
   * it, no statistics walk reads it (pins), and its grace (idle_until,
   * monotonic ns, set when its last connection closed) is over, or at
   * once if it never served a connection (served: one got past
   * .prepare, or it is the default export's kept one, opened at
   * start).  ending: it is being ended, and a client opening its name
   * waits for a new one (lifetime.h).
   */
  bool served;
  bool named;                   /* counted against cow-max-exports */
  unsigned connections;
  unsigned pins;
  uint64_t idle_until;
  bool ending;
  struct overlay *next;
  struct overlay *next_ending;  /* lifetime.c's own list */
};

/* Protects the list, each overlay's fields marked above, and the
 * facts of the units above that say so (REQUIRES (overlays_lock)): the
 * names refused, the counts of overlays ended, the default export's
 * name.  Not the rest of an overlay: each connection's handle points
 * to its overlay, which outlives the connection.  Taken when a client
 * opens or closes an export or asks for the default one, by the
 * statistics to pin the overlays they read, and by the thread ending
 * overlays to pick and unlink them; a new kept overlay's file is opened
 * holding it.  Held over nothing slower, and never while an overlay
 * ends.
 */
extern mutex_t overlays_lock;

/* The overlays, newest first, through ->next. */
extern struct overlay *overlay_list (void) REQUIRES (overlays_lock);

/* The overlay named name, or NULL. */
extern struct overlay *overlay_find (const char *name)
  REQUIRES (overlays_lock);

/* A new overlay named name, with its counters and, under
 * cow-base-handles, its pool of plugin contexts; no block layer yet,
 * not on the list.  NULL after nbdkit_error.
 */
extern struct overlay *overlay_new (const char *name);

extern void overlay_link (struct overlay *o) REQUIRES (overlays_lock);

/* Takes o off the list and wakes the clients waiting for an overlay
 * to end.
 */
extern void overlay_unlink (struct overlay *o) REQUIRES (overlays_lock);

/* Waits until an overlay has been taken off the list. */
extern void overlay_wait_unlinked (void) REQUIRES (overlays_lock);

/* Wakes the clients waiting in overlay_wait_briefly: an overlay's last
 * connection closed.
 */
extern void overlay_idle (void) REQUIRES (overlays_lock);

/* Waits until an overlay has been taken off the list or lost its last
 * connection, or ms milliseconds have passed.
 */
extern void overlay_wait_briefly (unsigned ms) REQUIRES (overlays_lock);

/* Frees o, not on the list, with its pool's contexts; its block layer
 * is its owner's to free first.
 */
extern void overlay_free (struct overlay *o);

#endif /* COW_OVERLAY_H */
