/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdkit-cow-filter: a writable copy-on-write view of any plugin.
 *
 * This file holds nbdkit's callbacks: the filter's life cycle and the
 * NBD requests of a connection, each handed to the unit that does it:
 * the parameters (params.h), the overlays of the exports (exports.h),
 * the requests sent to the plugin (baseio.h), the block layer of an
 * overlay (blk.h) and the statistics (stats.h).  The plugin is opened
 * read-only and never sees a write, zero or trim.
 */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include <nbdkit-filter.h>

#include "baseio.h"
#include "basepool.h"
#include "blk.h"
#include "changesname.h"
#include "checks.h"
#include "clonename.h"
#include "control.h"
#include "exitstatus.h"
#include "exports.h"
#include "fill.h"
#include "gather.h"
#include "nbdkitgaps.h"
#include "notice.h"
#include "params.h"
#include "registry.h"
#include "stats.h"

/* The handle of a connection: its export's overlay, and the plugin as
 * the connection reads it (its own context, or one the export shares
 * under cow-base-handles), learned by .prepare.  A connection to a
 * view, of changes or point-in-time (changesname.h), is one of the
 * export it views, which it only reads.
 */
struct conn {
  struct export_conn export;    /* exports.h */
  struct base_io base;          /* made by cow_prepare */
  bool served;                  /* cow_prepare succeeded */
  bool changes;                 /* a changes view, read-only */
  uint32_t since;               /*   since this epoch (changes.h) */
  char *view;                   /* a point-in-time view's name, or NULL */
};

/*----------------------------------------------------------------------
 * Configuration and life cycle.
 */

static int
cow_config (nbdkit_next_config *next, nbdkit_backend *nxdata,
            const char *key, const char *value)
{
  int r = params_parse (key, value);

  if (r != 1)
    return r;
  nbdkitgaps_note_plugin_key (key);
  return next (nxdata, key, value);
}

static int
cow_config_complete (nbdkit_next_config_complete *next, nbdkit_backend *nxdata)
{
  if (params_check () == -1)
    return -1;
  return next (nxdata);
}

/* What every overlay needs from the start, so that a bad $TMPDIR,
 * cow-file or cow-stats stops nbdkit before it forks, naming the
 * parameter.
 */
static int
cow_get_ready (int thread_model)
{
  exitstatus_note_start ();
  basepool_set_thread_model (thread_model);
  if (params.base_handles && nbdkitgaps_shared_reaches_none ())
    notice ("cow-base-handles=%u: every connection opens the plugin itself: "
            "nbdkit %s opens a shared handle without an export name, which "
            "the plugin's dir= needs (1.44 tells it)", params.base_handles,
            NBDKIT_VERSION_STRING);
  if (params.fill.mode != SWITCH_OFF && nbdkitgaps_shared_reaches_none ()) {
    nbdkit_error ("cow-fill=%s: nbdkit %s opens the fill's handle of the "
                  "plugin without an export name, which the plugin's dir= "
                  "needs (1.44 tells it)", params.fill.arg,
                  NBDKIT_VERSION_STRING);
    return -1;
  }
  nbdkitgaps_read_options ();
  if (exports_init () == -1)
    return -1;
  if (params.control_path &&
      control_init (params.control_path, nbdkitgaps_unix_socket ()) == -1)
    return -1;
  return params.stats_path ? stats_init (params.stats_path, gather_overlays)
                           : 0;
}

/* Threads must start after nbdkit forks into the background: the
 * statistics', the control socket's, and the one ending overlays whose
 * clients have left.
 * Nothing here opens the plugin: outside a connection nbdkit 1.32
 * gives plugins that ask for the export name none (the file plugin's
 * dir= crashes on it, sh and eval log errors), so the kept file of the
 * default export meets its base at the first connection (cow_prepare).
 */
static int
cow_after_fork (nbdkit_backend *backend)
{
  if (params.stats_path && stats_start () == -1)
    return -1;
  if (control_start () == -1 || fill_start (backend) == -1)
    return -1;
  return registry_start_thread ();
}

/* All connections are closed: the final statistics, then no overlay
 * ends but at .unload, and the plugin contexts the exports shared are
 * closed while the backend lives.
 */
static void
cow_cleanup (nbdkit_backend *backend)
{
  control_stop ();
  fill_stop ();
  if (params.stats_path)
    stats_finish ();
  registry_stop_thread ();
  registry_close_pools ();
}

static void
cow_unload (void)
{
  /* In case .cleanup was not reached (a start that failed after
   * .after_fork): the threads must not outlive the overlays they read.
   */
  control_stop ();
  fill_stop ();
  stats_stop ();
  registry_stop_thread ();
  if (exports_free () == -1)
    exitstatus_fail ();
  params_free ();
  exitstatus_exit ();
}

/* nbdkit asks this when a client asks for the default export "", and
 * hands .open the name returned.
 */
static const char *
cow_default_export (nbdkit_next_default_export *next, nbdkit_backend *nxdata,
                    int readonly, int is_tls)
{
  const char *name = next (nxdata, readonly);

  if (name != NULL)
    registry_learn_default (name);
  return name;
}

/* Whether a connection shares its export's contexts, saying once why
 * not: not one with TLS where a shared context sees none (--tls=on),
 * for the plugin may serve it by its TLS; and, where nbdkit opens a
 * shared context without the export's name, not one of a named export
 * (a plugin serving exports by name would fail), nor any when the
 * plugin is given dir= (the file plugin's exports by name crash on a
 * missing name: cow_get_ready said so).
 */
static bool
shares_base (int is_tls, const char *exportname)
{
  static atomic_bool said_tls, said_name;

  if (params.base_handles == 0 || nbdkitgaps_shared_reaches_none ())
    return false;
  if (is_tls && !nbdkitgaps_shared_sees_tls ()) {
    if (!atomic_exchange (&said_tls, true))
      notice ("cow-base-handles=%u: a client with TLS gets a plugin handle "
              "of its own: without --tls=require a shared one sees no TLS "
              "(said once)", params.base_handles);
    return false;
  }
  if (!nbdkitgaps_shared_reaches (exportname)) {
    if (!atomic_exchange (&said_name, true))
      notice ("cow-base-handles=%u: a named export gets a plugin handle per "
              "connection: nbdkit %s opens a shared one without the "
              "export's name (1.44 tells it; said once)",
              params.base_handles, NBDKIT_VERSION_STRING);
    return false;
  }
  return true;
}

/* Refuses the connection to exportname, a view of export's changes
 * since checkpoint, which export lacks: said once for the name.
 */
static void
say_no_checkpoint (const char *exportname, const char *export,
                   const char *checkpoint)
{
  nbdkit_error ("cow: export \"%s\": export \"%s\" has no checkpoint "
                "\"%s\" (nbdcow checkpoint list shows those it has)",
                exportname, export, checkpoint);
  refusal_note (exportname);
}

/* Refuses the connection to exportname, point-in-time view view of
 * export, which export lacks: said once for the name.
 */
static void
say_no_view (const char *exportname, const char *export, const char *view)
{
  if (view[0] == '\0')
    nbdkit_error ("cow: export \"%s\": names no view: its '%c' is followed "
                  "by no view's name", exportname, params.view_separator);
  else
    nbdkit_error ("cow: export \"%s\": export \"%s\" has no view \"%s\" "
                  "(nbdcow view show gives the one it has)", exportname,
                  export, view);
  refusal_note (exportname);
}

/* Makes c a changes view of its export, or of its point-in-time view
 * c->view, since checkpoint (since the overlay began if "").  Returns
 * 0, or -1 after nbdkit_error.
 */
static int
open_changes (struct conn *c, const char *exportname, const char *checkpoint)
{
  struct overlay *o = c->export.overlay;
  uint32_t view_epoch = c->view ? blk_view_epoch (o->blk, c->view) : 0;

  c->changes = true;
  if (checkpoint[0] != '\0' &&
      blk_checkpoint_since (o->blk, checkpoint, &c->since) == -1) {
    say_no_checkpoint (exportname, o->exportname, checkpoint);
    return -1;
  }
  if (c->view && c->since >= view_epoch) {
    nbdkit_error ("cow: export \"%s\": checkpoint \"%s\" is not older "
                  "than view \"%s\" of export \"%s\"", exportname,
                  checkpoint, c->view, o->exportname);
    refusal_note (exportname);
    return -1;
  }
  return 0;
}

/* Makes c a connection to point-in-time view view of its export.
 * Returns 0, or -1 after nbdkit_error.
 */
static int
open_instant (struct conn *c, const char *exportname, const char *view)
{
  struct overlay *o = c->export.overlay;
  char name[CHECKPOINT_NAME_MAX + 1];
  uint64_t kept;
  enum blk_view_state state = blk_view_get (o->blk, name, &kept);

  if (state == BLK_VIEW_NONE || strcmp (name, view) != 0) {
    say_no_view (exportname, o->exportname, view);
    return -1;
  }
  if (state != BLK_VIEW_ENDED && (c->view = strdup (view)) != NULL)
    return 0;
  if (state == BLK_VIEW_ENDED)
    nbdkit_error ("cow: export \"%s\": view \"%s\" of export \"%s\" %s; "
                  "its checkpoint \"%s\" remains", exportname, view,
                  o->exportname, blk_view_ended_why (params.lifetime_clients),
                  view);
  else
    nbdkit_error ("cow: %m");
  refusal_note (exportname);
  return -1;
}

/* Refuses a view of export name (view, or checkpoint: "" for every
 * change, NULL for none), which has neither an overlay in this run nor
 * a kept file from an earlier one, before an overlay (and a file) is
 * made for it: such an export has no view, no checkpoint and no
 * change.  Returns whether it refused, said; true after nbdkit_error
 * too.
 */
static bool
view_of_nothing (const char *exportname, const char *name, const char *view,
                 const char *checkpoint)
{
  int exists;

  if (view == NULL && checkpoint == NULL)
    return false;
  exists = exports_exist (name);
  if (exists != 0)
    return exists == -1;
  if (view)
    say_no_view (exportname, name, view);
  else if (checkpoint[0] != '\0')
    say_no_checkpoint (exportname, name, checkpoint);
  else {
    nbdkit_error ("cow: export \"%s\": export \"%s\" has no overlay, so "
                  "no changes (it has one once a client opens it)",
                  exportname, name);
    refusal_note (exportname);
  }
  return true;
}

/* Whether the name, of a kind of view (what) that only separator
 * serves, holds the recipes' character for it while the server has
 * no such separator: then it is refused, said here.
 */
static bool
separator_forgotten (const char *exportname, bool forgotten, char recipe,
                     const char *what, const char *param)
{
  if (!forgotten)
    return false;
  nbdkit_error ("cow: export \"%s\" is refused: a name with '%c' reads %s "
                "only under %s=%c, which this server lacks (to serve it as "
                "an export of its own, give %s another character)",
                exportname, recipe, what, param, recipe, param);
  return true;
}

/* Whether exportname is refused: it holds the recipes' character of a
 * kind of view the server has no separator for, or it was refused
 * before (each said once).
 */
static bool
name_refused (const char *exportname)
{
  if (separator_forgotten (exportname,
                           changes_separator_forgotten
                             (exportname, params.changes_separator,
                              params.clone_separator),
                           CHANGES_RECIPE_SEPARATOR, "what changed in an "
                           "export", "cow-changes-separator") ||
      separator_forgotten (exportname,
                           view_separator_forgotten
                             (exportname, params.view_separator,
                              params.clone_separator),
                           VIEW_RECIPE_SEPARATOR, "an export at an instant",
                           "cow-view-separator"))
    return true;
  if (!refusal_repeated (exportname))
    return false;
  nbdkit_debug ("cow: export \"%s\" refused again (said above)", exportname);
  return true;
}

/* The export's overlay, reading the plugin's export of the same name,
 * or under cow-clone-separator the one the name is a clone of; under
 * cow-changes-separator and cow-view-separator a name may name a view
 * of an export's changes, or of the export at an instant, or of the
 * changes of that (changesname.h), which connects to that export's
 * overlay.
 */
static void *
cow_open (nbdkit_next_open *next, nbdkit_context *context,
          int readonly, const char *exportname, int is_tls)
{
  struct conn *c = calloc (1, sizeof *c);
  const char *checkpoint = NULL, *view = NULL;
  char *changed = NULL, *viewed = NULL, *base = NULL;
  const char *name;
  int r = -1;

  if (c == NULL ||
      changes_view_name (exportname, params.changes_separator, &changed,
                         &checkpoint) == -1 ||
      instant_view_name (changed ? changed : exportname,
                         params.view_separator, &viewed, &view) == -1) {
    nbdkit_error ("cow: %m");
    goto out;
  }
  name = viewed ? viewed : changed ? changed : exportname;
  if ((base = clone_base_name (name, params.clone_separator)) == NULL) {
    nbdkit_error ("cow: %m");
    goto out;
  }
  if (name_refused (exportname) ||
      view_of_nothing (exportname, name, view, checkpoint))
    goto out;
  fill_client_connecting ();
  r = exports_connect (&c->export, name, base, shares_base (is_tls, base),
                       next, context);
  if (r == 0 &&
      ((view && open_instant (c, exportname, view) == -1) ||
       (changed && open_changes (c, exportname, checkpoint) == -1))) {
    exports_disconnect (&c->export, false);
    r = -1;
  }
 out:
  free (changed);
  free (viewed);
  free (base);
  if (r == -1) {
    if (c)
      free (c->view);
    free (c);
    return NULL;
  }
  return c;
}

/* The connection lets its overlay go (exports.h). */
static void
cow_close (void *handle)
{
  struct conn *c = handle;

  exports_disconnect (&c->export, c->served);
  free (c->view);
  free (c);
}

/* Runs before any request of the connection, so the overlay knows the
 * size before it is asked to do anything.  The kept file the command
 * line names (cow-file=PATH, the default export's) meets the base at
 * the first connection: if it cannot serve it (made for another size,
 * or too large a disk for its filesystem), nbdkit stops, as it would
 * at start, with status 1 (exitstatus.h).  Any other overlay that refuses
 * its base is refused alone, said once for the connection (notice.h).
 */
static int
cow_prepare (nbdkit_next *next, void *handle, int readonly)
{
  struct conn *c = handle;
  struct blk *blk = c->export.overlay->blk;

  if (c->export.alone)
    baseio_init_alone (&c->base, c->export.alone);
  else if (baseio_init (&c->base,
                        c->export.shared ? c->export.shared : next,
                        c->export.shared != NULL,
                        c->export.call_lock) == -1)
    return -1;
  if (blk_set_size (blk, c->base.size) == 0) {
    c->served = true;
    if (params.stats_path)
      stats_connection_served ();
    return 0;
  }
  refusal_note (c->export.overlay->exportname);
  if (params.cow_file && registry_is_default (c->export.overlay) &&
      !blk_met_base (blk)) {
    nbdkit_error ("cow-file=%s: nbdkit stops: the file cannot serve the "
                  "default export", params.cow_file);
    exitstatus_fail ();
    nbdkit_shutdown ();
  }
  return -1;
}

/* The plugin's minimum and maximum, which every request the filter
 * sends it respects (baseio.h), and a block preferred.
 */
static int
cow_block_size (nbdkit_next *next, void *handle,
                uint32_t *minimum, uint32_t *preferred, uint32_t *maximum)
{
  struct conn *c = handle;

  if (baseio_block_size (&c->base, minimum, preferred, maximum) == -1)
    return -1;
  block_limits_advertise (params.block_size, minimum, preferred, maximum);
  return 0;
}

/* Writable whatever the plugin says: the writes land in the overlay.
 * A view is read-only.
 */
static int
cow_can_write (nbdkit_next *next, void *handle)
{
  struct conn *c = handle;

  return !c->changes && c->view == NULL;
}

static int
cow_can_trim (nbdkit_next *next, void *handle)
{
  return 1;
}

/* Every connection sees the same overlay, and a flush makes every
 * completed write of every connection durable, so multiple connections
 * are consistent.
 */
static int
cow_can_multi_conn (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_extents (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_zero (nbdkit_next *next, void *handle)
{
  return NBDKIT_ZERO_NATIVE;
}

/* Zeroing only changes states, punches holes or writes zeros the same
 * way a write would, so it is never slower than writing: fast zero
 * requests always succeed.
 */
static int
cow_can_fast_zero (nbdkit_next *next, void *handle)
{
  return 1;
}

/* A throw-away overlay dies with nbdkit, so there is nothing a flush
 * or FUA could make more durable: both complete at once.  A kept one
 * is made durable by flush, and a write with FUA by a flush after it
 * (done_fua: nbdkit emulates FUA for plugins only, not for filters).
 */
static int
cow_can_flush (nbdkit_next *next, void *handle)
{
  return 1;
}

static int
cow_can_fua (nbdkit_next *next, void *handle)
{
  return params.cow_file ? NBDKIT_FUA_EMULATE : NBDKIT_FUA_NATIVE;
}

static int
cow_can_cache (nbdkit_next *next, void *handle)
{
  struct conn *c = handle;

  if (params.cow_on_cache)
    return NBDKIT_CACHE_NATIVE;
  return baseio_can_cache (&c->base);
}

/* What nbdkit would pass through, from the connection's base: with
 * cow-base-handles, or where the export stands alone, nbdkit hands the
 * callbacks no next.
 */
static int64_t
cow_get_size (nbdkit_next *next, void *handle)
{
  return ((struct conn *) handle)->base.size;
}

static int
cow_is_rotational (nbdkit_next *next, void *handle)
{
  return baseio_is_rotational (&((struct conn *) handle)->base);
}

static const char *
cow_export_description (nbdkit_next *next, void *handle)
{
  return baseio_export_description (&((struct conn *) handle)->base);
}


/* What c's reads do with the blocks of the base: under cow-fill they
 * fill what they read, which the fill would otherwise read from the
 * base again.
 */
static enum blk_read_mode
read_mode (const struct conn *c)
{
  if (c->changes)
    return BLK_READ_ONLY;
  if (params.fill.mode != SWITCH_OFF)
    return BLK_READ_FILL;
  return params_switch_on (&params.cow_on_read) ? BLK_READ_COPY_UP
    : BLK_READ_ONLY;
}

static int
cow_pread (nbdkit_next *next, void *handle,
           void *buf, uint32_t count, uint64_t offset, uint32_t flags,
           int *err)
{
  struct conn *c = handle;
  struct overlay *o = c->export.overlay;

  CHECK (next == NULL || next == c->base.next);

  stats_count_request (&o->requests, REQ_READ, count);
  if (c->view)
    return blk_view_read (o->blk, &c->base.blk, c->view, buf, count, offset,
                          err);
  return blk_read (o->blk, &c->base.blk, buf, count, offset,
                   read_mode (c), err);
}

/* The end of a write, zero or trim of o that returned r: with FUA, a
 * flush after it.  Returns r, or -1 with *err set if the flush failed.
 */
static int
done_fua (struct overlay *o, int r, uint32_t flags, int *err)
{
  if (r == -1 || !(flags & NBDKIT_FLAG_FUA))
    return r;
  return blk_flush (o->blk, err);
}

static int
cow_pwrite (nbdkit_next *next, void *handle,
            const void *buf, uint32_t count, uint64_t offset, uint32_t flags,
            int *err)
{
  struct conn *c = handle;
  struct overlay *o = c->export.overlay;

  CHECK (next == NULL || next == c->base.next);

  stats_count_request (&o->requests, REQ_WRITE, count);
  return done_fua (o, blk_write (o->blk, &c->base.blk, buf, count, offset,
                                 err), flags, err);
}

static int
cow_zero (nbdkit_next *next, void *handle,
          uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct conn *c = handle;
  struct overlay *o = c->export.overlay;

  CHECK (next == NULL || next == c->base.next);

  stats_count_request (&o->requests, REQ_ZERO, count);
  return done_fua (o, blk_zero (o->blk, &c->base.blk, count, offset,
                                (flags & NBDKIT_FLAG_MAY_TRIM) != 0, err),
                   flags, err);
}

static int
cow_trim (nbdkit_next *next, void *handle,
          uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct overlay *o = ((struct conn *) handle)->export.overlay;

  stats_count_request (&o->requests, REQ_TRIM, count);
  return done_fua (o, blk_trim (o->blk, count, offset, err), flags, err);
}

static int
cow_flush (nbdkit_next *next, void *handle, uint32_t flags, int *err)
{
  struct overlay *o = ((struct conn *) handle)->export.overlay;

  stats_count_request (&o->requests, REQ_FLUSH, 0);
  return blk_flush (o->blk, err);
}

static int
cow_cache (nbdkit_next *next, void *handle,
           uint32_t count, uint64_t offset, uint32_t flags, int *err)
{
  struct conn *c = handle;
  struct overlay *o = c->export.overlay;

  CHECK (next == NULL || next == c->base.next);

  stats_count_request (&o->requests, REQ_CACHE, count);
  if (params.cow_on_cache && !c->changes && c->view == NULL)
    return blk_copy_up (o->blk, &c->base.blk, count, offset, err);
  return baseio_cache (&c->base, count, offset, flags, err);
}

/* The extent type of a run of blocks in state: the base's extents for
 * blocks not in the overlay, but in a changes view, which reports them
 * (and those the overlay held before its checkpoint) as a hole that is
 * not zero: its reader has the base (or the copy made at the
 * checkpoint) for them.  -1: ask the base.
 */
static int
extent_type (enum blk_state state, bool view)
{
  switch (state) {
  case BLK_ALLOCATED:
    return 0;
  case BLK_ZERO:
    return NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO;
  case BLK_NOT_ALLOCATED:
  case BLK_PARTIAL:             /* never reported: cut into the others */
    break;
  }
  return view ? NBDKIT_EXTENT_HOLE : -1;
}

/* The run of o's blocks from offset as c sees them: the export's, its
 * changes, its view's or its view's changes (0 if its view is gone or
 * broken).
 */
static uint64_t
conn_state_run (const struct conn *c, struct overlay *o, uint64_t offset,
                uint64_t end, enum blk_state *state)
{
  if (c->view && c->changes)
    return blk_view_change_run (o->blk, c->view, offset, end, c->since,
                                state);
  if (c->view)
    return blk_view_state_run (o->blk, c->view, offset, end, state);
  if (c->changes)
    return blk_change_run (o->blk, offset, end, c->since, state);
  return blk_state_run (o->blk, offset, end, state);
}

static int
cow_extents (nbdkit_next *next, void *handle,
             uint32_t count, uint64_t offset, uint32_t flags,
             struct nbdkit_extents *extents, int *err)
{
  struct conn *c = handle;
  struct overlay *o = c->export.overlay;
  uint64_t end = offset + count;

  CHECK (next == NULL || next == c->base.next);

  stats_count_request (&o->requests, REQ_EXTENTS, count);
  while (offset < end) {
    enum blk_state state;
    uint64_t run_end = conn_state_run (c, o, offset, end, &state);
    uint32_t n = run_end - offset;
    int type = extent_type (state, c->changes);

    if (run_end == 0) {         /* the view is gone or broken */
      *err = EIO;
      return -1;
    }

    if (type == -1) {
      if (baseio_extents (&c->base, n, offset, flags, extents, err) == -1)
        return -1;
    }
    else if (nbdkit_add_extent (extents, offset, n, type) == -1) {
      *err = errno;
      return -1;
    }
    if (flags & NBDKIT_FLAG_REQ_ONE)
      return 0;
    offset = run_end;
  }
  return 0;
}

static struct nbdkit_filter filter = {
  .name              = "cow",
  .longname          = "nbdkit copy-on-write (COW) filter",
  .config            = cow_config,
  .config_help       = params_help,
  .config_complete   = cow_config_complete,
  .get_ready         = cow_get_ready,
  .after_fork        = cow_after_fork,
  .cleanup           = cow_cleanup,
  .unload            = cow_unload,
  .default_export    = cow_default_export,
  .open              = cow_open,
  .close             = cow_close,
  .prepare           = cow_prepare,
  .export_description = cow_export_description,
  .get_size          = cow_get_size,
  .block_size        = cow_block_size,
  .is_rotational     = cow_is_rotational,
  .can_write         = cow_can_write,
  .can_flush         = cow_can_flush,
  .can_trim          = cow_can_trim,
  .can_extents       = cow_can_extents,
  .can_fua           = cow_can_fua,
  .can_zero          = cow_can_zero,
  .can_fast_zero     = cow_can_fast_zero,
  .can_cache         = cow_can_cache,
  .can_multi_conn    = cow_can_multi_conn,
  .pread             = cow_pread,
  .pwrite            = cow_pwrite,
  .zero              = cow_zero,
  .trim              = cow_trim,
  .flush             = cow_flush,
  .cache             = cow_cache,
  .extents           = cow_extents,
};

NBDKIT_REGISTER_FILTER (filter)
