/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The overlays of the exports (exports.h). */

#include <config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "checks.h"
#include "exports.h"
#include "keptname.h"
#include "params.h"
#include "space.h"
#include "tempfiles.h"

/* The disk space of every overlay, counted against cow-max-size. */
static struct space space;

/* The files of the throw-away overlays, made by exports_init; NULL
 * with cow-file.
 */
static struct temp_files *temp_files;

/* Protects the list of overlays and the facts of the names below; not
 * the overlays: each connection's handle points to its overlay, which
 * outlives every connection.  Taken only when a client opens an export
 * or asks for the default one, and by the statistics to read the head
 * of the list; a new kept overlay's file is opened holding it.
 */
static pthread_mutex_t overlays_lock = PTHREAD_MUTEX_INITIALIZER;
static struct overlay *overlays;
static unsigned named_overlays;     /* those of names other than "" */
static uint64_t refused_names;      /* opens of new names refused */
/* The name nbdkit hands .open for the default export, from the first
 * client that asked for it; NULL before.
 */
static char *default_name;

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
 * sending names cannot fill the log.  The default export "" always has
 * room.  Requires overlays_lock.
 */
static bool
new_name_refused (const char *exportname)
{
  CHECK (held_by_me (&overlays_lock));
  if (exportname[0] == '\0' || named_overlays < params.max_exports - 1)
    return false;
  if (refused_names++ == 0)
    nbdkit_error ("cow-max-exports=%u: a new export name is refused: the "
                  "server has made all the overlays it may (the default "
                  "export and names opened before are still served; "
                  "logged once, cow-stats counts the refusals)",
                  params.max_exports);
  else
    nbdkit_debug ("cow-max-exports=%u: a new export name is refused",
                  params.max_exports);
  return true;
}

/* Requires overlays_lock. */
static struct overlay *
find_overlay (const char *name)
{
  struct overlay *o;

  CHECK (held_by_me (&overlays_lock));
  for (o = overlays; o; o = o->next)
    if (strcmp (o->exportname, name) == 0)
      return o;
  return NULL;
}

/* The name of the overlay of exportname: "" for the default export's
 * name but where an overlay has that very name (opened by it before
 * any client asked for the default export).  Requires overlays_lock.
 */
static const char *
overlay_name (const char *exportname)
{
  CHECK (held_by_me (&overlays_lock));
  if (default_name && strcmp (exportname, default_name) == 0 &&
      find_overlay (exportname) == NULL)
    return "";
  return exportname;
}

static void
free_overlay (struct overlay *o)
{
  basepool_free (o->pool);
  shardctr_free (&o->requests);
  free (o->exportname);
  free (o);
}

/* The overlay of exportname, made if it is new and not refused.
 * Requires overlays_lock.
 */
static struct overlay *
get_overlay (const char *exportname)
{
  struct overlay *o;

  exportname = overlay_name (exportname);
  if ((o = find_overlay (exportname)) != NULL)
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
  if (exportname[0] != '\0')
    ++named_overlays;
  return o;
}

struct overlay *
exports_open (const char *exportname)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  o = get_overlay (exportname);
  held_unlock (&overlays_lock);
  return o;
}

bool
exports_known (const char *exportname)
{
  bool known;

  held_lock (&overlays_lock);
  known = find_overlay (overlay_name (exportname)) != NULL;
  held_unlock (&overlays_lock);
  return known;
}

/* A client that opened the default export's name before any asked for
 * the default export keeps its overlay, which is then the default
 * export's until nbdkit restarts (said once, for cow-file puts its data
 * beside the default export's file).
 */
void
exports_learn_default (const char *name)
{
  held_lock (&overlays_lock);
  if (default_name == NULL) {
    default_name = strdup (name);
    if (default_name && name[0] != '\0' && find_overlay (name))
      nbdkit_error ("cow: the default export is \"%s\", which a client "
                    "opened by that name before any asked for the default "
                    "export: its overlay of that name serves both until "
                    "nbdkit restarts", name);
  }
  held_unlock (&overlays_lock);
}

bool
exports_is_default (const struct overlay *o)
{
  return o->exportname[0] == '\0';
}

int
exports_init (void)
{
  const char *tmpdir = getenv ("TMPDIR");
  struct overlay *o;

  space_init (&space, params.max_size);
  if (params.cow_file == NULL) {
    temp_files = temp_files_new (tmpdir ? tmpdir : "/var/tmp",
                                 params.stripes);
    return temp_files ? 0 : -1;
  }
  o = exports_open ("");
  return o ? 0 : -1;
}

/* The statistics of every overlay, oldest first.  The list is read
 * without overlays_lock past its head: entries are only ever added at
 * the head, complete, under the lock, and not freed before
 * exports_free.
 */
int
exports_gather (struct export_stats **exports, size_t *n, uint64_t *refused)
{
  struct overlay *head, *o;
  size_t i;

  held_lock (&overlays_lock);
  head = overlays;
  *refused = refused_names;
  held_unlock (&overlays_lock);

  *n = 0;
  for (o = head; o; o = o->next)
    ++*n;
  *exports = calloc (*n ? *n : 1, sizeof **exports);
  if (*exports == NULL)
    return -1;
  for (o = head, i = *n; o; o = o->next) {
    struct export_stats *e = &(*exports)[--i];

    e->name = o->exportname;
    blk_get_stats (o->blk, &e->blk);
    stats_sum_counters (&o->requests, e);
  }
  return 0;
}

void
exports_close_bases (void)
{
  struct overlay *o;

  held_lock (&overlays_lock);
  for (o = overlays; o; o = o->next) {
    basepool_free (o->pool);
    o->pool = NULL;
  }
  held_unlock (&overlays_lock);
}

int
exports_free (void)
{
  int r = 0;

  while (overlays) {
    struct overlay *o = overlays;
    overlays = o->next;
    if (blk_free (o->blk) == -1)
      r = -1;
    free_overlay (o);
  }
  temp_files_free (temp_files);
  free (default_name);
  return r;
}
