/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The overlays of the exports: one per export, made when a client
 * first opens it and kept until nbdkit exits, so that data never
 * crosses exports and a client reconnecting to an export sees its
 * earlier writes; or, with cow-lifetime=clients, until its last
 * connection has closed and the grace has passed with none opening it
 * again (a throw-away overlay is then discarded, a kept one closed
 * cleanly, to be opened again by the next client of its name).  Export
 * names reach .open canonical: nbdkit has replaced "" by the plugin's
 * .default_export, which exports_learn_default learns, so that the
 * default export is one overlay by whatever name it comes
 * (defaultname.h).  At most cow-max-exports overlays, one of
 * them kept for the default export: past that a new name is refused,
 * the first refusal logged and every one counted.  The server's space
 * cap (cow-max-size) and the files every throw-away overlay shares are
 * here too, as is the statistics' view of all the overlays.
 */

#ifndef COW_EXPORTS_H
#define COW_EXPORTS_H

#include <stdbool.h>

#include "basepool.h"
#include "blk.h"
#include "lifetime.h"
#include "shardctr.h"
#include "stats.h"

struct overlay {
  char *exportname;             /* "" for the default export */
  struct blk *blk;
  struct shardctr requests;     /* stats.h: requests, plugin opens */
  struct base_pool *pool;       /* with cow-base-handles; else NULL */

  /* Under overlays_lock (exports.c): the overlay ends only when no
   * connection has it, no statistics walk reads it, and its grace
   * (idle_until, monotonic ns, set when its last connection closed) is
   * over, or at once if it never served a connection (served: one got
   * past .prepare, or it is the default export's kept one, opened at
   * start).  ending: it is being ended, and a client opening its name
   * waits for a new one.
   */
  bool served;
  bool named;                   /* counted against cow-max-exports */
  unsigned connections;
  unsigned pins;
  uint64_t idle_until;
  bool ending;
  struct overlay *next;
  struct overlay *next_ending;  /* the ending thread's own list */
};

/* .get_ready: the space cap, and what every overlay needs from the
 * start: the throw-away overlays' files in $TMPDIR, or the default
 * export's kept overlay (opened, checked, locked).  Returns 0, or -1
 * after nbdkit_error naming the parameter.
 */
extern int exports_init (void);

/* The overlay of exportname for a new connection, made if it is new
 * (or ending: once it has ended), or NULL after nbdkit_error if it is
 * refused or cannot be made.  It lives at least until exports_close of
 * that connection.
 */
extern struct overlay *exports_open (const char *exportname);

/* The connection that opened o has closed, served (it got past
 * .prepare) or refused.  The last one starts the overlay's grace under
 * cow-lifetime=clients; an overlay that served no connection ends with
 * its last, whatever the lifetime, so that a refused name keeps
 * nothing: no place under cow-max-exports, descriptor, lock or space.
 */
extern void exports_close (struct overlay *o, bool served);

/* Whether exportname has an overlay that is not ending. */
extern bool exports_known (const char *exportname);

/* Under cow-lifetime=clients (lifetime.h): ends the overlays whose
 * grace is over at now, and returns when the next one's is, or
 * UINT64_MAX.
 */
extern lifetime_end_due exports_end_due;

/* The name nbdkit gives the default export, as the plugin said it
 * (defaultname.h).
 */
extern void exports_learn_default (const char *name);

/* Whether o is the default export's overlay. */
extern bool exports_is_default (const struct overlay *o);

/* The statistics of every overlay (stats.h). */
extern stats_gather exports_gather;

/* .cleanup: closes the plugin contexts the overlays share (the thread
 * that ends overlays has stopped).
 */
extern void exports_close_bases (void);

/* Frees every overlay, flushing the kept ones.  Returns 0, or -1 if a
 * kept overlay's last flush failed.
 */
extern int exports_free (void);

#endif /* COW_EXPORTS_H */
