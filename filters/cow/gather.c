/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The statistics' view of the overlays (gather.h). */

#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gather.h"
#include "registry.h"
#include "server.h"

int
gather_overlays (struct export_stats **exports, size_t *n,
                 struct server_stats *server)
{
  struct registry_view view;
  int r = registry_pin_all (&view);
  size_t i;

  server->refused_names = view.refused_names;
  server->alive = view.n;
  server->discarded = view.discarded;
  server->closed = view.closed;
  server_get_stats (server);
  *n = 0;
  *exports = calloc (view.n ? view.n : 1, sizeof **exports);
  if (r == -1 || *exports == NULL) {
    int err = errno;

    registry_unpin_all (&view);
    errno = err;
    return -1;
  }
  *n = view.n;
  for (i = 0; i < view.n; ++i) {
    struct export_stats *e = &(*exports)[i];
    struct overlay *o = view.overlays[i];

    e->name = strdup (o->exportname);
    e->connections = view.connections[i];
    blk_get_stats (o->blk, &e->blk);
    stats_sum_counters (&o->requests, e);
    fill_progress_read (&o->fill, &e->fill);
  }
  registry_unpin_all (&view);
  for (i = 0; i < *n; ++i)
    if ((*exports)[i].name == NULL) {
      errno = ENOMEM;
      return -1;
    }
  return 0;
}
