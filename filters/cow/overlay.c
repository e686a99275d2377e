/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the
 * licence.
 */

/* The list of the overlays (overlay.h). */

#include <config.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <nbdkit-filter.h>

#include "baseio.h"
#include "checks.h"
#include "overlay.h"
#include "params.h"
#include "stats.h"

mutex_t overlays_lock = PTHREAD_MUTEX_INITIALIZER;
static struct overlay *overlays GUARDED_BY (overlays_lock);
/* Signalled when an overlay is taken off the list or loses its last
 * connection.
 */
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;

struct overlay *
overlay_list (void)
{
  CHECK (held_by_me (&overlays_lock));
  return overlays;
}

struct overlay *
overlay_find (const char *name)
{
  struct overlay *o;

  CHECK (held_by_me (&overlays_lock));
  for (o = overlays; o; o = o->next)
    if (strcmp (o->exportname, name) == 0)
      return o;
  return NULL;
}

/* The contexts of the overlay's pool: those its connections share
 * (cow-base-handles), else one for the fill alone, else none.
 */
static unsigned
pool_size (void)
{
  if (params.base_handles > 0)
    return params.base_handles;
  return params.fill.mode != SWITCH_OFF;
}

struct overlay *
overlay_new (const char *name)
{
  struct overlay *o = calloc (1, sizeof *o);

  if (o == NULL || (o->exportname = strdup (name)) == NULL ||
      shardctr_init (&o->requests, STATS_EXPORT_COUNTERS) == -1 ||
      (pool_size () && (o->pool = basepool_new (pool_size ())) == NULL)) {
    nbdkit_error ("cow: %m");
    if (o)
      overlay_free (o);
    return NULL;
  }
  return o;
}

void
overlay_link (struct overlay *o)
{
  o->next = overlays;
  overlays = o;
}

void
overlay_unlink (struct overlay *o)
{
  struct overlay **p;

  for (p = &overlays; *p != o; p = &(*p)->next)
    ;
  *p = o->next;
  pthread_cond_broadcast (&changed);
}

void
overlay_wait_unlinked (void)
{
  pthread_cond_wait (&changed, &overlays_lock);
}

void
overlay_idle (void)
{
  pthread_cond_broadcast (&changed);
}

void
overlay_wait_briefly (unsigned ms)
{
  struct timespec until;

  clock_gettime (CLOCK_REALTIME, &until);
  until.tv_nsec += (long) ms * 1000000;
  until.tv_sec += until.tv_nsec / 1000000000;
  until.tv_nsec %= 1000000000;
  pthread_cond_timedwait (&changed, &overlays_lock, &until);
}

void
overlay_free (struct overlay *o)
{
  basepool_free (o->pool);
  baseio_facts_free (o->alone);
  shardctr_free (&o->requests);
  free (o->exportname);
  free (o);
}
