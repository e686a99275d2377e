/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the
 * licence.
 */

/* The statistics' view of the overlays (gather.h). */

#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "admission.h"
#include "checks.h"
#include "gather.h"
#include "lifetime.h"
#include "overlay.h"
#include "server.h"

/* Pins the overlays that are not ending into pinned[], oldest first,
 * and returns how many (at most max).
 */
static size_t
pin_overlays (struct overlay **pinned, size_t max) REQUIRES (overlays_lock)
{
  struct overlay *o;
  size_t n = 0, i;

  for (o = overlay_list (); o && n < max; o = o->next)
    if (!o->ending) {
      lifetime_pin (o);
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
  size_t i, ending = 0;

  held_lock (&overlays_lock);
  for (i = 0; i < n; ++i)
    if (lifetime_unpin (pinned[i]))
      pinned[ending++] = pinned[i];
  held_unlock (&overlays_lock);
  for (i = 0; i < ending; ++i)
    lifetime_end (pinned[i]);
}

int
gather_overlays (struct export_stats **exports, size_t *n,
                 struct server_stats *server)
{
  struct overlay **pinned, *o;
  size_t max = 0, i;

  held_lock (&overlays_lock);
  for (o = overlay_list (); o; o = o->next)
    max++;
  pinned = calloc (max ? max : 1, sizeof *pinned);
  *exports = calloc (max ? max : 1, sizeof **exports);
  *n = 0;
  if (pinned && *exports)
    *n = pin_overlays (pinned, max);
  for (i = 0; i < *n; ++i)
    (*exports)[i].connections = pinned[i]->connections;
  server->refused_names = admission_refused ();
  server->alive = *n;
  lifetime_ended (&server->discarded, &server->closed);
  held_unlock (&overlays_lock);
  server_get_stats (server);
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
    fill_read (&o->fill, &e->fill);
  }
  unpin_overlays (pinned, *n);
  free (pinned);
  for (i = 0; i < *n; ++i)
    if ((*exports)[i].name == NULL)
      return -1;
  return 0;
}
