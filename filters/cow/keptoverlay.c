/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The life of a kept overlay in the filter (keptoverlay.h). */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "keptoverlay.h"

/* Reports the failure of a call on the file. */
static void
report (const struct keptoverlay *ko)
{
  nbdkit_error ("cow-file=%s", ko->file.why);
}

/* The header of an existing file must match the configuration. */
static int
check_header (const struct keptoverlay *ko)
{
  const struct kept_header *h = &ko->file.header;

  if (h->layout.block_size != ko->block_size) {
    nbdkit_error ("cow-file=%s: made with cow-block-size=%" PRIu32
                  ", not %" PRIu32, ko->file.path, h->layout.block_size,
                  ko->block_size);
    return -1;
  }
  if (strcmp (h->name, ko->name) != 0) {
    nbdkit_error ("cow-file=%s: made for export \"%s\", not \"%s\"",
                  ko->file.path, h->name, ko->name);
    return -1;
  }
  return 0;
}

struct keptoverlay *
keptoverlay_open (const char *path, const char *name, uint32_t block_size)
{
  struct keptoverlay *ko;

  if (strlen (name) > KEPT_NAME_MAX) {
    nbdkit_error ("cow: export name longer than %d bytes", KEPT_NAME_MAX);
    return NULL;
  }
  ko = calloc (1, sizeof *ko);
  if (ko == NULL) {
    nbdkit_error ("cow: calloc: %m");
    return NULL;
  }
  ko->name = strdup (name);
  if (ko->name == NULL) {
    nbdkit_error ("cow: strdup: %m");
    free (ko);
    return NULL;
  }
  ko->block_size = block_size;
  if (keptfile_open (&ko->file, path, KEPTFILE_CREATE) == -1) {
    report (ko);
    free (ko->name);
    free (ko);
    return NULL;
  }
  if (ko->file.has_header && check_header (ko) == -1) {
    keptoverlay_close (ko, false);
    return NULL;
  }
  return ko;
}

/* Makes the header and state area of a file that has none. */
static int
create (struct keptoverlay *ko, uint64_t size)
{
  if (keptfile_create (&ko->file, ko->block_size, size, ko->name) == -1) {
    report (ko);
    return -1;
  }
  if (keptslots_init (&ko->slots, keptfile_blocks (&ko->file)) == -1) {
    nbdkit_error ("cow-file=%s: cannot hold the block slots: %m",
                  ko->file.path);
    return -1;
  }
  return 0;
}

/* Loads the states of a file that has a header and punches what a
 * crash left in the data of the others.  The sync of the header's flag
 * makes the states loaded durable before any write can take a slot
 * they leave free (docs/overlay-format.md).
 */
static int
load (struct keptoverlay *ko, uint64_t size, struct statemap *states)
{
  struct keptfile *kf = &ko->file;
  const struct kept_header *h = &kf->header;
  bool crashed = (h->flags & KEPT_OPEN) != 0;

  if (h->layout.base_size != size) {
    nbdkit_error ("cow-file=%s: made for a base of %" PRIu64 " bytes, "
                  "this base has %" PRIu64, kf->path, h->layout.base_size,
                  size);
    return -1;
  }
  if (keptfile_check_length (kf) == -1 ||
      keptfile_load_states (kf, states, &ko->slots, NULL) == -1) {
    report (ko);
    return -1;
  }
  keptfile_punch_unallocated (kf, states, &ko->slots);
  if (crashed)
    nbdkit_debug ("cow-file=%s: not closed cleanly: it holds what was "
                  "flushed before", kf->path);
  if (keptfile_set_flags (kf, KEPT_OPEN, h->recoveries + crashed) == -1) {
    report (ko);
    return -1;
  }
  return 0;
}

int
keptoverlay_start (struct keptoverlay *ko, uint64_t size,
                   struct statemap *states)
{
  if (!ko->file.has_header)
    return create (ko, size);
  return load (ko, size, states);
}

int
keptoverlay_flush (struct keptoverlay *ko, keptfile_take_pages *take,
                   keptfile_redirty_pages *redirty, void *opaque, int *err)
{
  if (keptfile_flush (&ko->file, take, redirty, opaque) == -1) {
    *err = errno;
    report (ko);
    return -1;
  }
  return 0;
}

void
keptoverlay_close (struct keptoverlay *ko, bool clean)
{
  struct keptfile *kf = &ko->file;

  if (clean) {
    if (keptfile_set_flags (kf, 0, kf->header.recoveries) == -1)
      report (ko);
    else
      keptfile_cut (kf, &ko->slots);
  }
  keptfile_close (kf);
  keptslots_free (&ko->slots);
  free (ko->name);
  free (ko);
}
