/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer's checkpoints, and its states as the changes view
 * reports them (blk.h, changes.h).
 */

#include <config.h>

#include <errno.h>

#include "blk.h"
#include "blkpriv.h"
#include "checks.h"

/* A kept overlay's changed checkpoints are flushed into its file at
 * once: a checkpoint said made survives a crash, one said deleted does
 * not come back.
 */
static int
keep_checkpoints (struct blk *blk)
{
  int err;

  store_note_checkpoints (blk->store);
  if (!store_flushes (blk->store) || blk_flush (blk, &err) == 0)
    return 0;
  errno = err;
  return -1;
}

/* A checkpoint that could not be made durable is not made. */
int
blk_checkpoint_create (struct blk *blk, const char *name)
{
  int err;

  if (!store_allows_checkpoints (blk->store)) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (changes_create (&blk->changes, name) == -1)
    return -1;
  if (keep_checkpoints (blk) == 0)
    return 0;
  err = errno;
  changes_delete (&blk->changes, name);
  store_note_checkpoints (blk->store);
  errno = err;
  return -1;
}

int
blk_checkpoint_delete (struct blk *blk, const char *name)
{
  if (changes_delete (&blk->changes, name) == -1)
    return -1;
  return keep_checkpoints (blk);
}

int
blk_checkpoint_since (struct blk *blk, const char *name, uint32_t *since)
{
  return changes_since (&blk->changes, name, since);
}

unsigned
blk_checkpoint_list (struct blk *blk, struct checkpoint *out)
{
  return changes_list (&blk->changes, out, NULL);
}

int
blk_checkpoint_identity (struct blk *blk, const char *name, uint64_t *serial,
                         uint32_t *epoch)
{
  *serial = blk->serial;
  return changes_since (&blk->changes, name, epoch);
}

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
