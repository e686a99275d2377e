/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The exports as connections see them (exports.h). */

#include <config.h>

#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "baseio.h"
#include "basepool.h"
#include "exports.h"
#include "nbdkitgaps.h"
#include "params.h"
#include "registry.h"
#include "server.h"
#include "statsrecords.h"

/* exports_connect to an overlay of exportname that stands alone, if
 * there is one.  Returns whether it did.
 */
static bool
connect_alone (struct export_conn *c, const char *exportname)
{
  c->overlay = registry_open_alone (exportname, &c->alone);
  return c->overlay != NULL;
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

  if (!registry_knows (exportname)) {
    opened = basepool_open (backend, base);
    if (opened == NULL)
      return -1;
  }
  c->overlay = registry_open (exportname);
  if (c->overlay == NULL) {
    if (opened)
      basepool_close (opened);
    return -1;
  }
  pool = registry_pool_use (c->overlay);
  if (pool == NULL) {           /* it stands alone since */
    if (opened)
      basepool_close (opened);
    c->alone = registry_alone (c->overlay);
    return 0;
  }
  use = basepool_take (pool, backend, base, opened);
  exports_count_plugin_opens (c->overlay, (opened != NULL) + use.opened);
  if (use.next == NULL) {
    registry_pool_done (c->overlay);
    registry_close (c->overlay, false);
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
  pool = registry_pool_use (o);
  if (pool == NULL)
    return;
  if (!basepool_has_open (pool) &&
      (opened = basepool_open (backend, base)) != NULL) {
    exports_count_plugin_opens (o, 1);
    basepool_offer (pool, opened);
  }
  registry_pool_done (o);
}

/* exports_connect through the connection's own context. */
static int
connect_own (struct export_conn *c, const char *exportname, const char *base,
             nbdkit_next_open *next, nbdkit_context *context)
{
  if (next (context, 1, base) == -1)
    return -1;
  c->overlay = registry_open (exportname);
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
  registry_stand_alone (o, facts);
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

/* Whether test holds of the kept file of the overlay exportname
 * reaches: 1 or 0, or -1 after nbdkit_error.
 */
static int
kept_file_passes (const char *exportname, bool (*test) (const char *name))
{
  char *name = registry_overlay_name (exportname);
  bool passes;

  if (name == NULL)
    return -1;
  passes = test (name);
  free (name);
  return passes;
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
  int whole;

  if (params.cow_file == NULL || registry_knows (exportname))
    return 0;
  whole = kept_file_passes (exportname, server_kept_is_whole);
  if (whole <= 0)
    return whole;
  c->overlay = registry_open (exportname);
  if (c->overlay == NULL)
    return -1;
  if (start_from_file (c->overlay) == -1) {
    registry_close (c->overlay, false);
    return -1;
  }
  c->alone = registry_alone (c->overlay);
  if (c->alone)
    return 1;
  registry_close (c->overlay, false);
  c->overlay = NULL;
  return 0;
}

int
exports_exist (const char *exportname)
{
  if (exportname[0] == '\0' || registry_knows (exportname))
    return 1;
  if (params.cow_file == NULL)
    return 0;
  return kept_file_passes (exportname, server_kept_exists);
}

struct overlay *
exports_pin_or_start (const char *exportname)
{
  struct overlay *o = registry_pin (exportname);

  if (o || kept_file_passes (exportname, server_kept_exists) != 1)
    return o;
  o = registry_pin_or_make (exportname);
  if (o && start_from_file (o) == -1) {
    registry_unpin (o);
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
    registry_pool_done (c->overlay);
  registry_close (c->overlay, served);
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
  struct overlay *o;

  if (server_kept_is_whole (name))
    return;
  o = registry_start_named (name);
  if (o)
    start_from_file (o);
}

int
exports_init (void)
{
  struct overlay *o;

  if (server_init () == -1 || registry_init (params.cow_file) == -1)
    return -1;
  if (params.cow_file == NULL)
    return 0;
  /* Alone, nothing else reaches it yet. */
  o = registry_start_default ();
  if (o == NULL || start_from_file (o) == -1)
    return -1;
  if (params.fill.mode != SWITCH_OFF)
    server_kept_each_named (start_for_fill);
  return 0;
}

int
exports_free (void)
{
  int r;

  server_exiting ();
  r = registry_free ();
  server_free ();
  return r;
}
