/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the
 * licence.
 */

/* The exports as connections see them (exports.h). */

#include <config.h>

#include <string.h>

#include <nbdkit-filter.h>

#include "admission.h"
#include "baseio.h"
#include "basepool.h"
#include "checks.h"
#include "defaultname.h"
#include "exports.h"
#include "lifetime.h"
#include "monotonic.h"
#include "params.h"
#include "server.h"
#include "stats.h"

/* A new name that finds no place under cow-max-exports waits at most
 * this long for one to come free (cow-lifetime=clients): the client
 * that held it may have hung up a moment before nbdkit closed its
 * connection.
 */
#define PLACE_WAIT_NS UINT64_C (1000000000)

/* The overlay of the overlay name name, made if it is new and admitted;
 * one that is ending is waited for, and made again.  NULL after
 * nbdkit_error.
 */
static struct overlay *
get_overlay (const char *name) REQUIRES (overlays_lock)
{
  uint64_t deadline = 0;
  struct overlay *o;

  for (;;) {
    while ((o = overlay_find (name)) != NULL && o->ending)
      overlay_wait_unlinked ();
    if (o)
      return o;
    if (admission_has_place (name))
      break;
    if (deadline == 0)
      deadline = monotonic_ns () + PLACE_WAIT_NS;
    if (!lifetime_make_place (deadline)) {
      admission_refuse ();
      return NULL;
    }
  }
  o = overlay_new (name);
  if (o == NULL)
    return NULL;
  o->blk = server_new_blk (name);
  if (o->blk == NULL) {
    overlay_free (o);
    return NULL;
  }
  overlay_link (o);
  admission_admit (o);
  return o;
}

/* The overlay of exportname for a new connection, counted in its
 * connections, or NULL after nbdkit_error.
 */
static struct overlay *
open_overlay (const char *exportname)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = get_overlay (defaultname_overlay_of (exportname));
  if (o)
    o->connections++;
  held_unlock (&overlays_lock);
  return o;
}

/* A connection of o has closed, served or not. */
static void
close_overlay (struct overlay *o, bool served)
{
  bool ends;

  held_lock (&overlays_lock);
  CHECK (o->connections > 0);
  o->served |= served;
  o->connections--;
  ends = lifetime_closed (o);
  held_unlock (&overlays_lock);
  if (ends)
    lifetime_end (o);
}

/* The overlay exportname reaches if it is not ending, else NULL. */
static struct overlay *
alive_overlay (const char *exportname) REQUIRES (overlays_lock)
{
  struct overlay *o = overlay_find (defaultname_overlay_of (exportname));

  return o && !o->ending ? o : NULL;
}

/* Whether exportname has an overlay that is not ending. */
static bool
known (const char *exportname)
{
  bool alive;

  held_lock (&overlays_lock);
  alive = alive_overlay (exportname) != NULL;
  held_unlock (&overlays_lock);
  return alive;
}

struct overlay *
exports_pin (const char *exportname)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = alive_overlay (exportname);
  if (o)
    lifetime_pin (o);
  held_unlock (&overlays_lock);
  return o;
}

/* An overlay that served no connection may end as its pin goes. */
void
exports_unpin (struct overlay *o)
{
  bool ends;

  held_lock (&overlays_lock);
  ends = lifetime_unpin (o);
  held_unlock (&overlays_lock);
  if (ends)
    lifetime_end (o);
}

struct base_pool *
exports_pool_use (struct overlay *o)
{
  struct base_pool *pool;

  held_lock (&overlays_lock);
  pool = o->alone ? NULL : o->pool;
  if (pool)
    o->pool_users++;
  held_unlock (&overlays_lock);
  return pool;
}

void
exports_pool_done (struct overlay *o)
{
  struct base_pool *closing = NULL;

  held_lock (&overlays_lock);
  CHECK (o->pool_users > 0);
  if (--o->pool_users == 0 && o->alone) {
    closing = o->pool;
    o->pool = NULL;
  }
  held_unlock (&overlays_lock);
  if (closing) {
    nbdkit_debug ("cow: export \"%s\" stands alone: its plugin handles "
                  "close", o->exportname);
    basepool_free (closing);
  }
}

void
exports_stand_alone (struct overlay *o, struct base_facts *facts)
{
  held_lock (&overlays_lock);
  if (o->alone == NULL) {
    o->alone = facts;
    facts = NULL;
  }
  held_unlock (&overlays_lock);
  baseio_facts_free (facts);
}

/* exports_connect to an overlay of exportname that stands alone, if
 * there is one.  Returns whether it did.
 */
static bool
connect_alone (struct export_conn *c, const char *exportname)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = alive_overlay (exportname);
  if (o && o->alone) {
    o->connections++;
    c->overlay = o;
    c->alone = o->alone;
  }
  held_unlock (&overlays_lock);
  return c->alone != NULL;
}

void
exports_count_plugin_opens (struct overlay *o, unsigned n)
{
  if (n == 0)
    return;
  shardctr_add (&o->requests, STATS_PLUGIN_OPENS, n);
  server_count_plugin_opens (n);
}

/* exports_connect through a context of the export's pool. */
static int
connect_shared (struct export_conn *c, const char *exportname,
                const char *base, nbdkit_backend *backend)
{
  nbdkit_next *opened = NULL;
  struct base_pool *pool;
  struct base_use use;

  if (!known (exportname)) {
    opened = basepool_open (backend, base);
    if (opened == NULL)
      return -1;
  }
  c->overlay = open_overlay (exportname);
  if (c->overlay == NULL) {
    if (opened)
      basepool_close (opened);
    return -1;
  }
  pool = exports_pool_use (c->overlay);
  if (pool == NULL) {           /* it stands alone since */
    if (opened)
      basepool_close (opened);
    c->alone = c->overlay->alone;
    return 0;
  }
  use = basepool_take (pool, backend, base, opened);
  exports_count_plugin_opens (c->overlay, (opened != NULL) + use.opened);
  if (use.next == NULL) {
    exports_pool_done (c->overlay);
    close_overlay (c->overlay, false);
    return -1;
  }
  c->shared = use.next;
  c->call_lock = use.call_lock;
  return 0;
}

/* Under cow-fill, opens in this connection's thread the context the
 * fill of o, a named export's overlay, reads base through, if its pool
 * has none yet: opened in the fill's own thread, outside any
 * connection, it would tell the plugin no export name.  Only from
 * nbdkit 1.44 on does a context opened for sharing tell it one.
 */
static void
open_for_fill (struct overlay *o, const char *base, nbdkit_backend *backend)
{
  struct base_pool *pool;
  nbdkit_next *opened;

  if (params.fill.mode == SWITCH_OFF || !SHARED_KNOWS_NAME || !base[0])
    return;
  pool = exports_pool_use (o);
  if (pool == NULL)
    return;
  if (!basepool_has_open (pool) &&
      (opened = basepool_open (backend, base)) != NULL) {
    exports_count_plugin_opens (o, 1);
    basepool_offer (pool, opened);
  }
  exports_pool_done (o);
}

/* exports_connect through the connection's own context. */
static int
connect_own (struct export_conn *c, const char *exportname, const char *base,
             nbdkit_next_open *next, nbdkit_context *context)
{
  if (next (context, 1, base) == -1)
    return -1;
  c->overlay = open_overlay (exportname);
  if (c->overlay == NULL)
    return -1;
  exports_count_plugin_opens (c->overlay, 1);
  open_for_fill (c->overlay, base, nbdkit_context_get_backend (context));
  return 0;
}

/* A kept overlay started from its file that holds every block, and
 * whose file has the plugin's facts, stands alone from the start, as
 * it did once its fill completed: no connection opens the plugin.
 * Returns 0, or -1 after nbdkit_error.
 */
static int
alone_from_file (struct overlay *o)
{
  const struct kept_facts *kept = blk_kept_facts (o->blk);
  struct base_facts *facts;

  if (kept == NULL || !blk_is_sized (o->blk) || !blk_holds_all (o->blk))
    return 0;
  facts = baseio_facts_from_kept (kept, blk_size (o->blk));
  if (facts == NULL)
    return -1;
  exports_stand_alone (o, facts);
  nbdkit_debug ("cow: export \"%s\": its kept overlay holds every block: "
                "it stands alone", o->exportname);
  return 0;
}

/* Starts o from its kept file, if a run before made it: sized by the
 * file, and standing alone if it is whole.  Returns 0, or -1 after
 * nbdkit_error.
 */
static int
start_from_file (struct overlay *o)
{
  if (blk_start_from_file (o->blk) == -1)
    return -1;
  return alone_from_file (o);
}

/* The overlay name of exportname. */
static const char *
overlay_name_of (const char *exportname)
{
  const char *name;

  held_lock (&overlays_lock);
  name = defaultname_overlay_of (exportname);
  held_unlock (&overlays_lock);
  return name;
}

/* exports_connect to an export that has no overlay in this run but a
 * kept file a run before left whole: its overlay is started from the
 * file and stands alone, as the default export's does from the start
 * (exports_init), so the plugin is not opened.  Returns 1 if it
 * connected so, 0 if the export is not such, -1 after nbdkit_error.
 */
static int
connect_from_file (struct export_conn *c, const char *exportname)
{
  if (params.cow_file == NULL || known (exportname) ||
      !server_kept_is_whole (overlay_name_of (exportname)))
    return 0;
  c->overlay = open_overlay (exportname);
  if (c->overlay == NULL)
    return -1;
  if (start_from_file (c->overlay) == -1) {
    close_overlay (c->overlay, false);
    return -1;
  }
  held_lock (&overlays_lock);
  c->alone = c->overlay->alone;
  held_unlock (&overlays_lock);
  if (c->alone)
    return 1;
  close_overlay (c->overlay, false);
  c->overlay = NULL;
  return 0;
}

struct overlay *
exports_pin_or_start (const char *exportname)
{
  struct overlay *o = exports_pin (exportname);

  if (o || !server_kept_exists (overlay_name_of (exportname)))
    return o;
  held_lock (&overlays_lock);
  o = get_overlay (defaultname_overlay_of (exportname));
  if (o)
    lifetime_pin (o);
  held_unlock (&overlays_lock);
  if (o && start_from_file (o) == -1) {
    exports_unpin (o);
    return NULL;
  }
  return o;
}

int
exports_connect (struct export_conn *c, const char *exportname,
                 const char *base, bool share, nbdkit_next_open *next,
                 nbdkit_context *context)
{
  int r;

  if (connect_alone (c, exportname))
    return 0;
  r = connect_from_file (c, exportname);
  if (r != 0)
    return r == 1 ? 0 : -1;
  if (share)
    return connect_shared (c, exportname, base,
                           nbdkit_context_get_backend (context));
  return connect_own (c, exportname, base, next, context);
}

void
exports_disconnect (const struct export_conn *c, bool served)
{
  if (c->shared)
    exports_pool_done (c->overlay);
  close_overlay (c->overlay, served);
}

void
exports_learn_default (const char *name)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = overlay_find (name);
  defaultname_learn (name, o && !o->ending);
  held_unlock (&overlays_lock);
}

bool
exports_is_default (const struct overlay *o)
{
  bool is_default;

  held_lock (&overlays_lock);
  is_default = defaultname_is (o->exportname);
  held_unlock (&overlays_lock);
  return is_default;
}

/* The overlay of the overlay name made at start, before any client,
 * as if a client had just left it: its grace starts now.  NULL after
 * nbdkit_error.
 */
static struct overlay *
get_overlay_at_start (const char *name) REQUIRES (overlays_lock)
{
  struct overlay *o = get_overlay (name);

  if (o) {
    o->served = true;
    lifetime_closed (o);
  }
  return o;
}

/* Under cow-fill, starts from its file the kept overlay of the named
 * export name that a run before left unfilled, as the default
 * export's is started, so that its fill goes on before any client
 * connects.  One that has no place under cow-max-exports, or fails to
 * start (said why), waits for its first connection.
 */
static void
start_for_fill (const char *name)
{
  struct overlay *o = NULL;

  if (server_kept_is_whole (name))
    return;
  held_lock (&overlays_lock);
  if (overlay_find (name) == NULL && admission_has_place (name))
    o = get_overlay_at_start (name);
  held_unlock (&overlays_lock);
  if (o)
    start_from_file (o);
}

int
exports_init (void)
{
  struct overlay *o;

  if (server_init () == -1 || defaultname_load (params.cow_file) == -1)
    return -1;
  if (params.cow_file == NULL)
    return 0;
  held_lock (&overlays_lock);
  o = get_overlay_at_start (defaultname_overlay ());
  held_unlock (&overlays_lock);
  /* Alone, nothing else reaches it yet. */
  if (o == NULL || start_from_file (o) == -1)
    return -1;
  if (params.fill.mode != SWITCH_OFF)
    server_kept_each_named (start_for_fill);
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
  o = overlay_list ();
  held_unlock (&overlays_lock);
  for (; o; o = o->next) {
    basepool_free (o->pool);
    o->pool = NULL;
  }
}

int
exports_free (void)
{
  struct overlay *o;
  int r = 0;

  server_exiting ();
  for (;;) {
    held_lock (&overlays_lock);
    o = overlay_list ();
    if (o)
      overlay_unlink (o);
    held_unlock (&overlays_lock);
    if (o == NULL)
      break;
    if (blk_free (o->blk) == -1)
      r = -1;
    overlay_free (o);
  }
  server_free ();
  defaultname_free ();
  return r;
}
