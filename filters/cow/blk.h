/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer: an overlay's blocks, their states and the locks of
 * the requests that change them (blk.c, with the files blkpriv.h
 * names, blkmap.c and basemap.c), over a store (store.h).
 * docs/design.md describes the state machine and the lock rules; this
 * header only says what each call does.
 *
 * Every call here may run in parallel with any other on the same
 * struct blk, except blk_new and blk_free.
 */

#ifndef COW_BLK_H
#define COW_BLK_H

#include <stdbool.h>
#include <stdint.h>

#include "blktypes.h"
#include "changes.h"
#include "kept.h"

struct blk;
struct space;
struct temp_files;

/* Both make an overlay of blocks of block_size bytes (a power of two),
 * its disk cut into stripes stripes (stripes.h), whose disk space
 * counts against space (space.h), which every overlay of the server
 * shares (cow-max-size).  Each returns NULL after nbdkit_error.
 *
 * blk_new: a throw-away overlay in slots of the files every throw-away
 * overlay shares (tempfiles.h), one per stripe.
 */
extern struct blk *blk_new (uint32_t block_size, unsigned stripes,
                            struct temp_files *files, struct space *space);

/* blk_new_kept: the kept overlay at path for export name, creating path
 * if it is missing, and locked against other processes.  An existing
 * file must be a sound overlay for this block size and name (its base
 * size is checked by blk_set_size).
 */
extern struct blk *blk_new_kept (uint32_t block_size, unsigned stripes,
                                 const char *path, const char *name,
                                 struct space *space);

/* What the overlay holds against cow-max-size: its store's overhead,
 * the bytes only its view keeps and its allocated blocks.  No request
 * may run.
 */
extern uint64_t blk_space_charged (struct blk *blk);

/* Frees the overlay, giving back its space (cow-max-size) and its
 * store: a throw-away one's slots of the files, punched; a kept one
 * flushed and closed.  No other call may run on it.  Returns 0, or -1
 * after nbdkit_error if the flush failed.
 */
extern int blk_free (struct blk *blk);

/* Makes every write completed so far durable in a kept overlay; does
 * nothing for a throw-away one.  Returns 0, or -1 with *err set.
 */
extern int blk_flush (struct blk *blk, int *err);

/* Tells the layer the size of the base.  The first call fixes it and
 * starts the store (a kept file's header made, or checked against the
 * size); a later call with another size fails, because the overlay
 * cannot follow a base that changes under it.  Returns 0 or -1.
 */
extern int blk_set_size (struct blk *blk, uint64_t size);

/* A kept overlay whose file was made before takes the base size the
 * file was made for, and starts, before it meets any base, so that it
 * takes checkpoints and fills before a client connects; the first
 * blk_set_size then checks the base against that size, refusing
 * another with a message naming the file.  Does nothing for a new
 * file, a throw-away overlay or one already sized.  Returns 0 or -1.
 */
extern int blk_start_from_file (struct blk *blk);

/* A kept overlay's record of the plugin's facts (kept.h): those its
 * file has (NULL: none, or a throw-away overlay), and a new record
 * made durable (0, or -1 after nbdkit_error; a throw-away overlay
 * keeps none).  blk_kept_facts not beside blk_keep_facts.
 */
extern const struct kept_facts *blk_kept_facts (struct blk *blk);
extern int blk_keep_facts (struct blk *blk, const struct kept_facts *facts);

/* Whether a call of blk_set_size (or blk_start_from_file) has fixed
 * the size, and whether a blk_set_size has met a base of that size.
 * blk_is_sized takes no lock: it never waits on the I/O of the first
 * blk_set_size, which says false until it is done.
 */
extern bool blk_is_sized (struct blk *blk);
extern bool blk_met_base (struct blk *blk);

/* The size fixed, once blk_is_sized. */
extern uint64_t blk_size (struct blk *blk);

/* Whether the sized overlay holds every block (allocated or zero), so
 * that nothing reads the base any more: a block never leaves that.
 */
extern bool blk_holds_all (struct blk *blk);

/* What a read does with the blocks of the base it reads. */
enum blk_read_mode {
  BLK_READ_ONLY,                /* reads them */
  BLK_READ_COPY_UP,             /* copies them up first (cow-on-read) */
  BLK_READ_FILL,                /* as blk_fill first (under cow-fill) */
};

/* The NBD operations.  Each returns 0, or -1 with *err set, leaving
 * no block marked allocated without its data in the overlay.  A write
 * or zero that needs new overlay space past the limit of its space
 * fails with ENOSPC.  A read or cache never does: its copy into the
 * overlay, given up when there is no room for it (the limit less the
 * writes' share, a full filesystem), leaves blocks in the base.
 */
extern int blk_read (struct blk *blk, const struct blk_base *base,
                     void *buf, uint32_t count, uint64_t offset,
                     enum blk_read_mode mode, int *err);
/* buf NULL writes zeros, leaving the blocks allocated. */
extern int blk_write (struct blk *blk, const struct blk_base *base,
                      const void *buf, uint32_t count, uint64_t offset,
                      int *err);
/* may_trim: whole blocks become holes (BLK_ZERO), and a partial block
 * that reads as zeros without being in the overlay stays out of it;
 * otherwise they are all allocated, holding zeros.
 */
extern int blk_zero (struct blk *blk, const struct blk_base *base,
                     uint32_t count, uint64_t offset, bool may_trim,
                     int *err);
/* Whole blocks become BLK_ZERO; partial blocks are left alone. */
extern int blk_trim (struct blk *blk, uint32_t count, uint64_t offset,
                     int *err);
/* Copies the unallocated blocks touching the range into the overlay,
 * as many as there is room for.
 */
extern int blk_copy_up (struct blk *blk, const struct blk_base *base,
                        uint32_t count, uint64_t offset, int *err);

/* The background fill (fill.h): as blk_copy_up, but a block the base
 * is known to read as zeros (its extents say so) becomes zero in the
 * overlay without being read, and no room fails with ENOSPC.
 */
extern int blk_fill (struct blk *blk, const struct blk_base *base,
                     uint32_t count, uint64_t offset, int *err);

/* How many reads of a base clients of any overlay (not the fill) have
 * started, wrapping, and whether one of them is under way now.
 */
extern unsigned blk_client_base_reads (void);
extern bool blk_client_base_reads_under_way (void);

/* Sets *state to the state of the block holding offset and returns the
 * end of the run of bytes in [offset, end) in that same state.
 * Requires offset < end <= size.
 */
extern uint64_t blk_state_run (struct blk *blk, uint64_t offset,
                               uint64_t end, enum blk_state *state);

/* Checkpoints (changes.h): each call returns 0, or -1 with errno set
 * as changes.h says, but blk_checkpoint_list, which copies them,
 * oldest first, into out (room for CHECKPOINTS_MAX) and returns how
 * many.  A kept overlay's are flushed into its file as they are made
 * or deleted: create fails with EOPNOTSUPP if the file's format keeps
 * none, and with a flush's errno, making nothing, if the flush fails.
 */
extern int blk_checkpoint_create (struct blk *blk, const char *name);
extern int blk_checkpoint_delete (struct blk *blk, const char *name);
extern int blk_checkpoint_since (struct blk *blk, const char *name,
                                 uint32_t *since);
extern unsigned blk_checkpoint_list (struct blk *blk,
                                     struct checkpoint *out);

/* Sets *id and *epoch to checkpoint name's: together, what names
 * this instance of the checkpoint, across restarts of a kept overlay
 * (a checkpoint deleted and made again, of another overlay, or of a
 * file made again, has another).  Returns 0, or -1 with errno set
 * (ENOENT: no such checkpoint).
 */
extern int blk_checkpoint_identity (struct blk *blk, const char *name,
                                    uint64_t *id, uint32_t *epoch);

/* blk_state_run for the changes view since epoch since (0: since the
 * overlay began): a block not changed since then is BLK_NOT_ALLOCATED,
 * as if the overlay did not hold it.
 */
extern uint64_t blk_change_run (struct blk *blk, uint64_t offset,
                                uint64_t end, uint32_t since,
                                enum blk_state *state);

/* The point-in-time view (docs/design.md, "Point-in-time views"): at
 * most one, named after the checkpoint made with it, reading as the
 * overlay did at that instant while the overlay changes.  The caller
 * serializes blk_view_create and blk_view_delete.
 *
 * blk_view_create makes checkpoint name and the view at the same
 * instant: a change that ended before lies before it, one that began
 * after lies after it, one in flight wholly on one side.  Returns 0,
 * or -1 with errno: EOPNOTSUPP if the store cannot keep a view, EBUSY
 * if the overlay has one, or as blk_checkpoint_create.
 * blk_view_delete deletes it (and gives back what it kept; its
 * checkpoint stays): 0, or -1 with errno ESTALE if view name ended
 * with the server that made it (a kept overlay's, before a restart),
 * ENOENT if the overlay has no view name.
 */
enum blk_view_state {
  BLK_VIEW_NONE,                /* no view */
  BLK_VIEW_LIVE,                /* it reads as the overlay did */
  BLK_VIEW_BROKEN,              /* it ran out of room: its reads fail */
  /* A kept overlay's, which ended with the server that made it (views
   * do not survive a restart): its checkpoint remains.
   */
  BLK_VIEW_ENDED,
};

/* What is said of a view in BLK_VIEW_ENDED, after its name: with the
 * server, or, when overlays end with their clients, with the overlay
 * (closed after its last client left, or as nbdkit stopped).
 */
static inline const char *
blk_view_ended_why (bool overlays_end_with_clients)
{
  if (overlays_end_with_clients)
    return "ended with the overlay that made it (views do not survive "
           "their overlay's end: under cow-lifetime=clients it ends once "
           "its last client has left, or as nbdkit stops)";
  return "ended with the nbdkit that made it (views do not survive a "
         "restart of nbdkit)";
}

/* What the control socket and the statistics call a state. */
static inline const char *
blk_view_state_name (enum blk_view_state state)
{
  static const char *const names[] = {
    [BLK_VIEW_NONE] = "none", [BLK_VIEW_LIVE] = "live",
    [BLK_VIEW_BROKEN] = "broken", [BLK_VIEW_ENDED] = "ended",
  };

  return names[state];
}
extern int blk_view_create (struct blk *blk, const char *name);
extern int blk_view_delete (struct blk *blk, const char *name);

/* The view's state (BLK_VIEW_ENDED only where there is no other),
 * copying its name into name (room for CHECKPOINT_NAME_MAX + 1) and
 * the bytes it alone keeps into *kept.
 */
extern enum blk_view_state blk_view_get (struct blk *blk, char *name,
                                         uint64_t *kept);

/* Whether the places only a deleted view kept are still going back to
 * the filesystem in the background: then copies the view's name into
 * name (room for CHECKPOINT_NAME_MAX + 1) and the blocks the give-back
 * has yet to look at into *blocks_left.
 */
extern bool blk_view_giving_back (struct blk *blk, char *name,
                                  uint64_t *blocks_left);

/* blk_read in BLK_READ_ONLY, and blk_state_run, of view name: -1 with
 * *err EIO if the view is broken (a read that overlapped its breaking
 * too) or there is no view name; blk_view_state_run returns 0 then.
 */
extern int blk_view_read (struct blk *blk, const struct blk_base *base,
                          const char *name, void *buf, uint32_t count,
                          uint64_t offset, int *err);
extern uint64_t blk_view_state_run (struct blk *blk, const char *name,
                                    uint64_t offset, uint64_t end,
                                    enum blk_state *state);

/* The epoch of view name's checkpoint (changes.h), which its changes
 * views compare with: 0 if there is no view name.
 */
extern uint32_t blk_view_epoch (struct blk *blk, const char *name);

/* blk_change_run for the changes view of view name since epoch since,
 * below the view's: a block that held at the view's instant what it
 * held at since is BLK_NOT_ALLOCATED.  0 if there is no view name.
 */
extern uint64_t blk_view_change_run (struct blk *blk, const char *name,
                                     uint64_t offset, uint64_t end,
                                     uint32_t since, enum blk_state *state);

/* Statistics (cow-stats=FILE).  The name of a lock in docs/design.md
 * and in the statistics:
 */
extern const char *blk_lock_name (enum blk_lock lock);

struct blk_stats {
  uint64_t block_size;
  /* Blocks in each enum blk_state, but that the partial blocks count
   * in BLK_ALLOCATED too (the overlay holds them, in part).
   */
  uint64_t blocks[BLK_STATES];
  /* The files the overlay's data lies in (a throw-away overlay's are
   * those all throw-away overlays share), and the disk space it takes
   * in them: its own.
   */
  unsigned files;
  uint64_t overlay_bytes;
  /* Blocks copied up from the base: by cow-on-read, by cow-on-cache,
   * read to complete a partial write (read-modify-write), and by the
   * background fill (zero blocks of the base included, unread).
   */
  uint64_t copy_ups_read, copy_ups_cache, copy_ups_rmw, copy_ups_fill;
  uint64_t base_reads, base_read_bytes;   /* calls of base->pread */
  uint64_t lock_waits[BLK_LOCKS];         /* times a thread had to wait */
  uint64_t lock_wait_ns[BLK_LOCKS];       /* and for how long, in total */
  /* The point-in-time view: its state, name and bytes it alone keeps
   * (which overlay_bytes counts too).
   */
  enum blk_view_state view_state;
  char view_name[CHECKPOINT_NAME_MAX + 1];
  uint64_t view_kept;
  /* Bytes copied in the overlay to complete units a write moved in
   * part, because a view kept them (every view so far).
   */
  uint64_t view_copied;
};

/* Fills *stats.  Counters are read while requests run, so they are
 * each exact but not taken at one instant; the state map is walked in
 * short stretches under state_lock.
 */
extern void blk_get_stats (struct blk *blk, struct blk_stats *stats);

#endif /* COW_BLK_H */
