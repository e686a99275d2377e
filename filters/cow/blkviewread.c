/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The reads of the views (blk.h): a changes view's runs, the blocks
 * changed since a checkpoint; and a point-in-time view's reads and
 * runs, as the overlay was at its instant.  They stand above the
 * requests (blk.c), whose runs and reads they cut and follow; the
 * view's state they check is struct blk's (blkpriv.h).
 */

#include <config.h>

#include <errno.h>
#include <string.h>

#include "blk.h"
#include "blkpriv.h"

/* A run of blocks in the overlay (allocated or zero) is cut where
 * their marks cross since; a block outside it is reported as it is,
 * whatever its mark.
 */
uint64_t
blk_change_run (struct blk *blk, uint64_t offset, uint64_t end,
                uint32_t since, enum blk_state *state)
{
  const struct blockgeom *g = &blk->map.geom;
  uint64_t run_end = blk_state_run (blk, offset, end, state);
  uint64_t b, stop, changed_end;
  bool changed;

  if (*state == BLK_NOT_ALLOCATED)
    return run_end;
  b = blockgeom_block (g, offset);
  stop = blockgeom_block (g, run_end - 1) + 1;
  changed_end = blockgeom_start (g, changes_run (&blk->changes, b, stop,
                                                 since, &changed));
  if (!changed)
    *state = BLK_NOT_ALLOCATED;
  return changed_end < run_end ? changed_end : run_end;
}

/* Whether view name can be read: 0, or -1 with *err EIO (it broke, or
 * it was deleted).  Requires the gate passed.
 */
static int
view_readable (struct blk *blk, const char *name, int *err)
{
  enum blk_view_state state = blk_view_state_of (blk);

  if (state == BLK_VIEW_LIVE && strcmp (blk->view_name, name) == 0)
    return 0;
  *err = EIO;
  return -1;
}

int
blk_view_read (struct blk *blk, const struct blk_base *base,
               const char *name, void *buf, uint32_t count, uint64_t offset,
               int *err)
{
  int r;

  gate_enter (&blk->gate);
  r = view_readable (blk, name, err);
  if (r == 0)
    r = blk_read_held (blk, base, true, buf, count, offset, err);
  /* A read the view's breaking overlapped may have met new bytes. */
  if (r == 0)
    r = view_readable (blk, name, err);
  gate_leave (&blk->gate);
  return r;
}

/* blk_view_state_run with the gate passed and the view readable. */
static uint64_t
view_run (struct blk *blk, uint64_t offset, uint64_t end,
          enum blk_state *state)
{
  uint64_t run_end = blk_held_run (blk, true, offset, end, state, NULL);

  while (run_end < end) {
    enum blk_state next;
    uint64_t next_end = blk_held_run (blk, true, run_end, end, &next, NULL);

    if (next != *state)
      break;
    run_end = next_end;
  }
  return run_end;
}

uint64_t
blk_view_state_run (struct blk *blk, const char *name, uint64_t offset,
                    uint64_t end, enum blk_state *state)
{
  uint64_t run_end = 0;
  int err;

  gate_enter (&blk->gate);
  if (view_readable (blk, name, &err) == 0)
    run_end = view_run (blk, offset, end, state);
  gate_leave (&blk->gate);
  return run_end;
}

/* Whether block b had changed since epoch since at the view's instant. */
static bool
changed_then (struct blk *blk, uint64_t b, uint32_t since)
{
  uint32_t mark = slotmap_get (changes_marks (&blk->changes), b);

  return changes_mark_since (&blk->changes,
                             blkmap_view_mark (&blk->map, b, mark), since);
}

uint64_t
blk_view_change_run (struct blk *blk, const char *name, uint64_t offset,
                     uint64_t end, uint32_t since, enum blk_state *state)
{
  const struct blockgeom *g = &blk->map.geom;
  uint64_t run_end = 0, b, stop, changed_end;
  bool changed;
  int err;

  gate_enter (&blk->gate);
  if (view_readable (blk, name, &err) == 0) {
    run_end = view_run (blk, offset, end, state);
    if (*state != BLK_NOT_ALLOCATED) {
      b = blockgeom_block (g, offset);
      stop = blockgeom_block (g, run_end - 1) + 1;
      changed = changed_then (blk, b, since);
      for (++b; b < stop && changed_then (blk, b, since) == changed; ++b)
        ;
      changed_end = blockgeom_start (g, b);
      if (!changed)
        *state = BLK_NOT_ALLOCATED;
      if (changed_end < run_end)
        run_end = changed_end;
    }
  }
  gate_leave (&blk->gate);
  return run_end;
}
