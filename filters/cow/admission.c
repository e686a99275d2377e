/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the
 * licence.
 */

/* Admission under cow-max-exports (admission.h). */

#include <config.h>

#include <nbdkit-filter.h>

#include "admission.h"
#include "checks.h"
#include "defaultname.h"
#include "params.h"

/* Those made not as the default export's. */
static unsigned named_overlays GUARDED_BY (overlays_lock);
static uint64_t refused_names GUARDED_BY (overlays_lock);

bool
admission_has_place (const char *name)
{
  CHECK (held_by_me (&overlays_lock));
  return defaultname_is (name) || named_overlays < params.max_exports - 1;
}

void
admission_refuse (void)
{
  CHECK (held_by_me (&overlays_lock));
  if (refused_names++ == 0)
    nbdkit_error ("cow-max-exports=%u: a new export name is refused: the "
                  "server %s (the default export and names opened before "
                  "are still served; logged once, cow-stats counts the "
                  "refusals)", params.max_exports,
                  params.lifetime_clients
                  ? "holds as many overlays as it may at once"
                  : "has made all the overlays it may");
  else
    nbdkit_debug ("cow-max-exports=%u: a new export name is refused",
                  params.max_exports);
}

void
admission_admit (struct overlay *o)
{
  o->named = !defaultname_is (o->exportname);
  if (o->named)
    ++named_overlays;
}

void
admission_leave (const struct overlay *o)
{
  if (o->named)
    --named_overlays;
}

uint64_t
admission_refused (void)
{
  return refused_names;
}
