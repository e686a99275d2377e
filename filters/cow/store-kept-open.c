/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The kept store opened and started (store.h, store-kept.h): a file
 * opened and locked, an existing one checked against the configuration
 * and its records and checkpoints loaded, so that a damaged file is
 * refused before any base is known; at the start, a new file's header
 * made, or an existing one checked against the base, its marks
 * restored and what a crash left in its data area punched.  All of it
 * before any request: no lock.
 */

#include <config.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <nbdkit-filter.h>

#include "divround.h"
#include "kept.h"
#include "lockranks.h"
#include "store-kept.h"

/* Version 4 on: the bits of dirty_marks, so that noting a raised mark
 * cannot fail.
 */
static int
alloc_dirty_marks (struct store_kept *k)
{
  if (!k->history)
    return 0;
  free (k->dirty_marks);
  k->dirty_marks = calloc (div_round_up (marks_pages (k), 64),
                           sizeof *k->dirty_marks);
  if (k->dirty_marks == NULL) {
    nbdkit_error ("cow-file=%s: %m", k->kept.path);
    return -1;
  }
  return 0;
}

static int
create (struct store_kept *k, uint64_t size)
{
  if (kept_create (&k->kept, k->block_size, size, k->name) == -1) {
    report (k);
    return -1;
  }
  return alloc_dirty_marks (k);
}

/* The kept_found_mark of restore_history: marks block b. */
static int
restore_mark (void *opaque, uint64_t b, uint32_t mark)
{
  struct store_kept *k = opaque;

  changes_mark_epoch (k->changes, b, 1, mark);
  return 0;
}

/* Marks every block of the overlay changed since every checkpoint
 * (epoch last, the newest), and has the next flush write the marks.
 * Only before any request: no lock.
 */
static void
mark_all_changed (struct store_kept *k, uint32_t last)
{
  uint64_t blocks = kept_blocks (&k->kept), b = 0;

  while (b < blocks) {
    unsigned state;
    uint64_t end = statemap_run (&k->states, b, blocks, &state);

    if (state != KEPT_NOT_ALLOCATED) {
      changes_mark_epoch (k->changes, b, end - b, last);
      store_note_marks (&k->store, b, end - b);
    }
    b = end;
  }
}

/* Version 4: the checkpoints of the file, into the block layer's
 * changes, when the file is opened: a changes view checks its
 * checkpoint before the overlay starts.
 */
static int
restore_checkpoints (struct store_kept *k)
{
  struct kept_table table;

  if (kept_load_table (&k->kept, &table) == -1) {
    report (k);
    return -1;
  }
  changes_restore (k->changes, table.checkpoints, table.count,
                   table.last_epoch);
  k->table_sequence = table.sequence;
  k->table_kept = table.count > 0;
  /* Said as an error, though the file is served.  The first flush
   * writes the table over a copy that is not whole, damaged or torn.
   */
  if (k->kept.table_damaged)
    nbdkit_error ("cow-file=%s: copy %u of the checkpoint table is "
                  "damaged (the file was closed cleanly, so no crash tore "
                  "it): the checkpoints may be older than they were, and "
                  "every block of the overlay counts as changed since "
                  "each", k->kept.path, k->kept.table_bad);
  if (k->kept.table_bad)
    store_note_checkpoints (&k->store);
  return 0;
}

/* Version 4: the marks of the file, into the block layer's changes,
 * sized by changes_start; if the file was left marked stale while it
 * had checkpoints, every block of the overlay is marked changed since
 * each, and the file stays marked stale until a flush writes those
 * marks.  A mark above the table's newest epoch (a checkpoint made
 * but not yet in the file's table) moves the epochs past it.
 */
static int
restore_marks (struct store_kept *k)
{
  struct kept_overlay *ko = &k->kept;
  struct checkpoint list[CHECKPOINTS_MAX];
  uint32_t max_mark, last;
  unsigned count;

  if (kept_load_marks (ko, restore_mark, k, &max_mark) == -1) {
    report (k);
    return -1;
  }
  count = changes_list (k->changes, list, &last);
  if (max_mark > last)
    changes_restore (k->changes, list, count, last = max_mark);
  k->stale = kept_marks_stale (ko, count);
  if (k->stale) {
    nbdkit_debug ("cow-file=%s: changes may have been written that its "
                  "marks do not hold: every block of the overlay counts "
                  "as changed since each of its %u checkpoints", ko->path,
                  count);
    mark_all_changed (k, last);
  }
  return 0;
}

uint64_t
kept_made_size (struct store *st)
{
  struct store_kept *k = kept_of (st);

  return k->kept.has_header ? k->kept.header.layout.geom.size : 0;
}

int
kept_check_size (struct store *st, uint64_t size)
{
  struct store_kept *k = kept_of (st);
  uint64_t made = k->kept.header.layout.geom.size;

  if (made == size)
    return 0;
  nbdkit_error ("cow-file=%s: made for a base of %" PRIu64 " bytes, "
                "this base has %" PRIu64, k->kept.path, made, size);
  return -1;
}

const struct kept_facts *
kept_facts (struct store *st)
{
  struct store_kept *k = kept_of (st);

  return k->kept.has_header && k->kept.header.facts.known
    ? &k->kept.header.facts : NULL;
}

/* The sync of the header's flag makes the states loaded durable before
 * any write can take a slot they leave free (docs/overlay-format.md).
 */
static int
load (struct store_kept *k, uint64_t size)
{
  struct kept_overlay *ko = &k->kept;
  const struct kept_header *h = &ko->header;
  bool crashed = (h->flags & KEPT_OPEN) != 0;

  if (kept_check_size (&k->store, size) == -1)
    return -1;
  if (alloc_dirty_marks (k) == -1)
    return -1;
  /* The marks first: the records' (version 8) go into the pages.  The
   * log folded before the file is cut: until then a state page may
   * name a slot past the last one the states take.
   */
  if (k->history && restore_marks (k) == -1)
    return -1;
  if (h->layout.log_length && kept_fold_log (k, ko->log.dropped) == -1)
    return -1;
  kept_punch_unallocated (ko, &k->states);
  if (h->layout.log_length && kept_log_fresh (ko) == -1) {
    report (k);
    return -1;
  }
  if (ko->log.dropped)
    nbdkit_debug ("cow-file=%s: the last change of %" PRIu64 " blocks was "
                  "dropped: its data did not reach the disk before the "
                  "crash", ko->path, ko->log.dropped);
  /* Said as an error, though the file is served: flushed writes are
   * lost, and nbdcow check says the file is damaged.
   */
  if (ko->log.lost_records) {
    char lost[KEPT_LOG_LOST_WORDS];

    kept_log_lost_words (&ko->log, lost);
    nbdkit_error ("cow-file=%s: %s: a disk error changed it after its flush",
                  ko->path, lost);
  }
  if (crashed)
    nbdkit_debug ("cow-file=%s: not closed cleanly: it holds what was "
                  "flushed before", ko->path);
  if (kept_set_flags (ko, KEPT_OPEN | (k->stale ? KEPT_MARKS_STALE : 0),
                      h->recoveries + crashed) == -1) {
    report (k);
    return -1;
  }
  return 0;
}

/* From here on the file is marked open, until a clean close. */
int
kept_start (struct store *st, uint64_t size, uint64_t *overhead)
{
  struct store_kept *k = kept_of (st);
  const struct kept_layout *l = &k->kept.header.layout;
  struct stat st_file;

  if ((k->kept.has_header ? load (k, size) : create (k, size)) == -1)
    return -1;
  /* What lies between the metadata and the data area is a hole. */
  *overhead = kept_metadata_end (l);
  if (l->packed && fstat (k->kept.fd, &st_file) == 0 &&
      (uint64_t) st_file.st_size > l->data_offset)
    k->sized_slots = blockgeom_block (&l->geom,
                                      st_file.st_size - l->data_offset);
  k->started = true;
  return 0;
}

/* The slotmap_each_fn of has_places: a block with units in place 1. */
static int
found_place (uint64_t b, uint32_t where, void *opaque)
{
  (void) b;
  (void) where;
  (void) opaque;
  return 1;
}

/* Whether a block of the file has units in place 1: looking at the
 * leaves of the map of places that exist, not at every block.
 */
static bool
has_places (const struct store_kept *k)
{
  return k->kept.header.layout.places &&
         slotmap_each (&k->kept.where, found_place, NULL) != 0;
}

/* The records loaded from an existing file: runs of blocks in the
 * overlay or zero, and each block held in part.  Only before any
 * request: no lock.
 */
int
kept_loaded_blocks (struct store *st, store_found_blocks *found,
                    void *opaque)
{
  struct store_kept *k = kept_of (st);
  uint64_t blocks = k->kept.has_header ? kept_blocks (&k->kept) : 0;
  struct store_blocks r = { .first = 0 };
  bool places = blocks > 0 && has_places (k);

  for (; r.first < blocks; r.first += r.n) {
    unsigned state;

    r.n = statemap_run (&k->states, r.first, blocks, &state) - r.first;
    r.state = state;
    r.units = 0;
    r.where = 0;
    if (state == KEPT_PARTIAL) {
      r.n = 1;
      r.units = kept_parts_get (&k->kept, r.first);
    }
    if (places && (state == KEPT_PARTIAL || state == KEPT_ALLOCATED)) {
      r.n = kept_places_cut (&k->kept, r.first, r.first + r.n) - r.first;
      r.where = kept_where_get (&k->kept, r.first);
    }
    if (state != KEPT_NOT_ALLOCATED && found (opaque, &r) == -1)
      return -1;
  }
  return 0;
}

/*----------------------------------------------------------------------
 * Opening.
 */

/* The header of an existing file must match the configuration. */
static int
check_header (const struct store_kept *k)
{
  const struct kept_header *h = &k->kept.header;

  if (blockgeom_block_size (&h->layout.geom) != k->block_size) {
    nbdkit_error ("cow-file=%s: made with cow-block-size=%" PRIu64
                  ", not %" PRIu32, k->kept.path,
                  blockgeom_block_size (&h->layout.geom), k->block_size);
    return -1;
  }
  if (strcmp (h->name, k->name) != 0) {
    nbdkit_error ("cow-file=%s: made for export \"%s\", not \"%s\"",
                  k->kept.path, h->name, k->name);
    return -1;
  }
  return 0;
}

/* Checks an existing file's length and loads its states (and slots),
 * which need only its header, so that a damaged file is refused before
 * any base is known.
 */
static int
load_states (struct store_kept *k)
{
  struct kept_overlay *ko = &k->kept;

  if (kept_check_length (ko) == -1 ||
      kept_load_states (ko, &k->states, NULL) == -1) {
    report (k);
    return -1;
  }
  return 0;
}

struct store *
store_kept_open (const char *path, const char *name, uint32_t block_size,
                 const struct stripes *stripes, struct changes *changes)
{
  struct store_kept *k;

  if (strlen (name) > KEPT_NAME_MAX) {
    nbdkit_error ("cow: export name longer than %d bytes", KEPT_NAME_MAX);
    return NULL;
  }
  k = calloc (1, sizeof *k);
  if (k == NULL || (k->name = strdup (name)) == NULL) {
    nbdkit_error ("cow: %m");
    free (k);
    return NULL;
  }
  k->store.ops = &kept_store_ops;
  k->store.stripes = stripes;
  k->changes = changes;
  k->block_size = block_size;
  k->states = (struct statemap) STATEMAP_INIT;
  k->dirty_pages = (struct statemap) STATEMAP_INIT;
  k->kept.fd = -1;
  held_init (&k->page_lock, LOCK_RANK_PAGE);
  held_init (&k->slot_lock, LOCK_RANK_SLOT);
  held_init (&k->stale_lock, LOCK_RANK_STALE);
  held_init (&k->log_lock, LOCK_RANK_LOG);
  held_init (&k->watch_lock, LOCK_RANK_WATCH);
  if (kept_open (&k->kept, path, KEPT_CREATE) == -1) {
    report (k);
    kept_free (k);
    return NULL;
  }
  if (k->kept.has_header &&
      (check_header (k) == -1 || load_states (k) == -1)) {
    kept_free (k);
    return NULL;
  }
  /* A new file is laid out in the current version, which keeps them. */
  k->history = !k->kept.has_header || k->kept.header.layout.history;
  if (k->kept.has_header && k->history && restore_checkpoints (k) == -1) {
    kept_free (k);
    return NULL;
  }
  posix_fadvise (k->kept.fd, 0, 0, POSIX_FADV_RANDOM);
  return &k->store;
}
