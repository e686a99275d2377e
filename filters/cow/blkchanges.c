/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer's checkpoints (blk.h, changes.h): made durable in a
 * kept store at once, deleted, listed and named.
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
static int
make_checkpoint (struct blk *blk, const char *name, bool view)
{
  int err;

  if (!store_allows_checkpoints (blk->store)) {
    errno = EOPNOTSUPP;
    return -1;
  }
  if (changes_create (&blk->changes, name, view) == -1)
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
blk_checkpoint_create (struct blk *blk, const char *name)
{
  return make_checkpoint (blk, name, false);
}

int
blk_checkpoint_create_with_view (struct blk *blk, const char *name)
{
  return make_checkpoint (blk, name, true);
}

bool
blk_checkpoint_end_view (struct blk *blk, const char *name)
{
  if (!changes_end_view (&blk->changes, name))
    return false;
  store_note_checkpoints (blk->store);
  return true;
}

void
blk_checkpoints_keep (struct blk *blk)
{
  keep_checkpoints (blk);       /* failed, the next flush writes them */
}

bool
blk_checkpoint_view_of (struct blk *blk, char *name)
{
  return changes_view_of (&blk->changes, name);
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
blk_checkpoint_identity (struct blk *blk, const char *name, uint64_t *id,
                         uint32_t *epoch)
{
  struct checkpoint c;

  if (changes_get (&blk->changes, name, &c) == -1)
    return -1;
  *id = c.id;
  *epoch = c.epoch;
  return 0;
}
