/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The checkpoints of an overlay file (format version 4): listed, and
 * the overlay narrowed to what changed since one of them, as the
 * filter's changes view reports it (docs/overlay-format.md).
 */

#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "nbdcow.h"
#include "slotmap.h"

/* The kept_found_mark of load_history: into a slotmap. */
static int
keep_mark (void *opaque, uint64_t b, uint32_t mark)
{
  struct slotmap *marks = opaque;

  if (slotmap_reserve (marks, b, 1) == -1)
    return -1;
  slotmap_set (marks, b, mark);
  return 0;
}

int
overlay_file_history (struct overlay_file *ov, struct overlay_history *h)
{
  struct kept_overlay *ko = &ov->kept;
  uint32_t max_mark;

  memset (h, 0, sizeof *h);
  h->marks = (struct slotmap) SLOTMAP_INIT;
  if (!ko->header.layout.history)
    return EXIT_OK;
  if (kept_load_table (ko, &h->table) == -1)
    return report_kept (ko);
  if (slotmap_init (&h->marks, kept_blocks (ko)) == -1) {
    nbdcow_error ("%s: %m", ko->path);
    return EXIT_ERROR;
  }
  if (kept_load_marks (ko, keep_mark, &h->marks, &max_mark) == -1) {
    overlay_history_free (h);
    return report_kept (ko);
  }
  /* As the filter restores it: marks that may miss a change count as
   * every block of the overlay changed.
   */
  h->stale = kept_marks_stale (ko, h->table.count);
  return EXIT_OK;
}

void
overlay_history_free (struct overlay_history *h)
{
  slotmap_free (&h->marks);
}

bool
overlay_history_changed (const struct overlay_history *h, uint64_t b,
                         uint32_t epoch)
{
  return h->stale || slotmap_get (&h->marks, b) >= epoch;
}

/* Sets *epoch to checkpoint name's, or says what the file has. */
static int
find_checkpoint (const struct overlay_file *ov, const struct overlay_history *h,
                 const char *name, uint32_t *epoch)
{
  unsigned i;

  if (!ov->kept.header.layout.history) {
    nbdcow_error ("%s: format version %u keeps no checkpoints",
                  ov->kept.path, ov->kept.header.version);
    return -1;
  }
  for (i = 0; i < h->table.count; ++i)
    if (strcmp (h->table.checkpoints[i].name, name) == 0) {
      *epoch = h->table.checkpoints[i].epoch;
      return 0;
    }
  nbdcow_error ("%s: no checkpoint \"%s\" (nbdcow info lists those it has)",
                ov->kept.path, name);
  return -1;
}

int
overlay_file_since (struct overlay_file *ov, const char *name)
{
  struct overlay_history h;
  uint64_t blocks = kept_blocks (&ov->kept), b;
  uint32_t epoch;
  int r = overlay_file_history (ov, &h);

  if (r != EXIT_OK)
    return r;
  if (find_checkpoint (ov, &h, name, &epoch) == -1)
    r = EXIT_ERROR;
  else
    for (b = 0; b < blocks; ++b)
      if (statemap_get (&ov->states, b) != KEPT_NOT_ALLOCATED &&
          !overlay_history_changed (&h, b, epoch))
        statemap_set (&ov->states, b, 1, KEPT_NOT_ALLOCATED);
  overlay_history_free (&h);
  return r;
}
