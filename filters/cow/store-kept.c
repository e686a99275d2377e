/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The kept store (store.h, cow-file=PATH): one file in the kept format
 * (kept/kept.h, docs/overlay-format.md), opened and started
 * (store-kept-open.c), then read, written, flushed and closed here, in
 * the order that format makes crash-safe, each failure reported by
 * nbdkit_error naming the file.  The store keeps its own
 * copy of the records of blocks (store.h: a state, and the sub-blocks
 * of a partial block), which its state pages are made of, and which
 * pages changed since they were written; the block layer tells it of
 * every change (set_blocks) and learns the records loaded from the
 * file through loaded_blocks, as dm-snapshot's persistent store
 * keeps its metadata and reports it through read_metadata.
 *
 * A packed file (format version 3) keeps block b in a slot, at
 * data_offset + slot * block size: a block written for the first time
 * takes the lowest free slot, a block punched whole gives its slot up
 * (retired: not taken again while the file stays open, so a read
 * racing the punch never finds another block's data).  Reads find a
 * block with no slot (one punched meanwhile) as zeros.  The file is
 * extended ahead of its slots, sparsely, GROW_BYTES at a time.  Files
 * of versions 1 and 2 keep block b at data_offset + b * block size.
 * One table of operations serves both layouts; kept_data_run (kept.h)
 * says where the data of blocks lies in either.
 *
 * A file of version 4 keeps the overlay's history too: the
 * checkpoints and the mark of each block (changes.h), which start
 * restores into the block layer's changes and every flush writes with
 * the states.  Its header's MARKS_STALE flag says when a change may
 * lie in the file that the marks there do not hold: set, durably,
 * before the first change after a flush that cleared it, and cleared
 * by a flush only when no change was in flight from its start to its
 * end.  A file found with the flag set after a crash has every block
 * of the overlay marked as changed since every checkpoint: more than
 * changed, never less (docs/overlay-format.md).
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "checks.h"
#include "diskbytes.h"
#include "divround.h"
#include "fullio.h"
#include "kept.h"
#include "lockranks.h"
#include "punch.h"
#include "store-kept.h"
#include "store.h"
#include "storeio.h"

/* A packed file is extended this far ahead of its slots at a time,
 * sparsely: a write that changes the file's length cost a quarter of
 * the 4K random writes into new blocks (docs/performance.md).
 */
#define GROW_BYTES (64 * 1024 * 1024)

/* Under stale_lock, as every write of the header while requests run. */
static int
kept_keep_facts (struct store *st, const struct kept_facts *facts)
{
  struct store_kept *k = kept_of (st);
  int r;

  held_lock (&k->stale_lock);
  r = kept_set_facts (&k->kept, facts);
  if (r == -1)
    report (k);
  held_unlock (&k->stale_lock);
  return r;
}

/*----------------------------------------------------------------------
 * The data of blocks, where kept_data_run says it lies.
 */

/* The end of the piece of [offset, end) from offset on that lies in
 * one run of the file in place, and in *at the file offset of its
 * first byte; with *found false if offset's block has no slot there
 * (punched meanwhile), the end of that block.
 */
static uint64_t
data_run (const struct store_kept *k, uint64_t offset, uint64_t end,
          unsigned place, bool *found, uint64_t *at)
{
  const struct blockgeom *g = geom_of (k);
  uint64_t b = blockgeom_block (g, offset);
  uint64_t n = kept_data_run (&k->kept, b,
                              blockgeom_block (g, end - 1) - b + 1, place,
                              at);
  uint64_t stop;

  *found = n > 0;
  if (n == 0)
    return blockgeom_piece_end (g, offset, end);
  *at += offset - blockgeom_start (g, b);
  stop = blockgeom_start (g, b + n);
  return stop < end ? stop : end;
}

/* A file of version 6 keeps a block's units in two places; a new file
 * is made in that version.
 */
static bool
kept_holds_places (struct store *st)
{
  struct store_kept *k = kept_of (st);

  return !k->kept.has_header || k->kept.header.layout.places;
}

/* The table, the states and the marks allocated on the filesystem.  A
 * filesystem that cannot allocate ahead (EOPNOTSUPP) allocates them as
 * a flush writes them, as before any view.
 */
static int
kept_begin_places (struct store *st, int *err)
{
  struct store_kept *k = kept_of (st);
  const struct kept_layout *l = &k->kept.header.layout;
  uint64_t end = l->marks_offset + l->marks_length;

  if (fallocate (k->kept.fd, 0, l->table_offset, end - l->table_offset) == 0)
    return 1;
  if (errno == EOPNOTSUPP)
    return 0;
  *err = errno;
  return -1;
}

/* From state page p on, the pages that hold only zeros in memory,
 * written or not (their blocks all not allocated): returns the end of
 * their run, p if page p is not one.  Caller holds page_lock.
 */
static uint64_t
zero_state_pages (struct store_kept *k, uint64_t p) REQUIRES (k->page_lock)
{
  uint64_t per_page = k->kept.header.layout.blocks_per_page;
  uint64_t blocks = kept_blocks (&k->kept), end;
  unsigned state;

  end = statemap_run (&k->states, p * per_page, blocks, &state);
  if (state != KEPT_NOT_ALLOCATED)
    return p;
  return end == blocks ? state_pages (k) : end / per_page;
}

/* The slotmap_each_fn of kept_end_places: block b has a mark, so its
 * marks page is not zero.
 */
static int
note_marked_page (uint64_t b, uint32_t mark, void *opaque)
{
  uint8_t *marked = opaque;

  (void) mark;
  marked[b / KEPT_MARKS_PER_PAGE] = 1;
  return 0;
}

/* Punches pages [p, end) of the state area (marks page m being page
 * state_pages + m).
 */
static void
punch_pages (struct store_kept *k, uint64_t p, uint64_t end)
{
  punch_hole (k->kept.fd,
              k->kept.header.layout.states_offset + p * KEPT_STATE_PAGE,
              (end - p) * KEPT_STATE_PAGE);
}

/* Punches the runs of state and marks pages that hold only zeros.  A
 * run of state pages is found and punched holding page_lock, so that a
 * copy-up (which passes no gate) setting a state there waits, and then
 * dirties its page for the next flush; no change runs, so no mark
 * moves.
 */
static void
kept_end_places (struct store *st)
{
  struct store_kept *k = kept_of (st);
  uint64_t p = 0, end, states = state_pages (k);
  uint8_t *marked;

  while (p < states) {
    held_lock (&k->page_lock);
    end = zero_state_pages (k, p);
    if (end > p)
      punch_pages (k, p, end);
    held_unlock (&k->page_lock);
    p = end > p ? end : p + 1;
  }
  if (!k->history || (marked = calloc (marks_pages (k), 1)) == NULL)
    return;
  slotmap_each (changes_marks (k->changes), note_marked_page, marked);
  for (p = 0; p < marks_pages (k); p = end + 1) {
    for (end = p; end < marks_pages (k) && !marked[end]; ++end)
      ;
    if (end > p)
      punch_pages (k, states + p, states + end);
  }
  free (marked);
}

static int
kept_read (struct store *st, void *buf, uint64_t count, uint64_t offset,
           unsigned place, int *err)
{
  struct store_kept *k = kept_of (st);
  uint64_t end = offset + count, pos = offset, stop, at;
  char *p = buf;
  bool found;

  CHECK (place == 0 || k->kept.header.layout.places);
  for (; pos < end; p += stop - pos, pos = stop) {
    stop = data_run (k, pos, end, place, &found, &at);
    if (!found)
      memset (p, 0, stop - pos);
    else if (pread_full (k->kept.fd, p, stop - pos, at) == -1) {
      storeio_report ("read", count, offset, err);
      return -1;
    }
  }
  return 0;
}

/* Version 7: the file has a log. */
static bool
logs (const struct store_kept *k)
{
  return k->kept.header.layout.log_length != 0;
}

/* Version 8: its records carry the marks of their blocks. */
static bool
logs_marks (const struct store_kept *k)
{
  return k->history && k->kept.header.version >= KEPT_LOG_MARKS_VERSION;
}

/* Extends the file, sparsely, past its last slot taken, so that the
 * writes of the next GROW_BYTES of new slots leave its length alone.
 * Best effort: a write past the end extends the file anyway.  The
 * length only grows, to past every slot taken, so it never cuts off a
 * write of another stripe.
 */
static void
grow_ahead (struct store_kept *k) REQUIRES (k->slot_lock)
{
  const struct blockgeom *g = geom_of (k);
  uint64_t step = GROW_BYTES >> g->shift, sized;
  uint64_t end = kept_slots_end (&k->kept.slots);

  CHECK (held_by_me (&k->slot_lock));
  if (end <= k->sized_slots)
    return;
  if (step == 0)
    step = 1;
  sized = div_round_up (end, step) * step;
  if (ftruncate (k->kept.fd, k->kept.header.layout.data_offset
                 + blockgeom_start (g, sized)) == 0)
    k->sized_slots = sized;
}

/* Packed: gives every block of [offset, end) that has none a slot in
 * place, in order, so that blocks written together lie together.  Done before
 * any byte is written, so that a write that cannot have its slots
 * fails having written nothing.  The write locks of the range keep
 * other threads from changing these blocks' slots; it takes slot_lock
 * only if a block has no slot.  Sets *fresh if every block had none
 * and each took one past the end of the file as it opened (version 7:
 * kept_log_fresh), which reads as zeros.
 */
static int
take_slots (struct store *st, uint64_t offset, uint64_t end, unsigned place,
            bool *fresh) REQUIRES (*st->stripes)
{
  struct store_kept *k = kept_of (st);
  const struct blockgeom *g = geom_of (k);
  struct kept_slots *slots = &k->kept.slots;
  uint64_t b = blockgeom_block (g, offset), first = b;
  uint64_t last = blockgeom_block (g, end - 1);
  uint64_t slot;
  int r = 0;

  *fresh = false;
  if (!k->kept.header.layout.packed)
    return 0;
  while (b <= last && kept_slots_get (slots, b, place, &slot))
    ++b;
  if (b > last)
    return 0;
  *fresh = b == first && logs (k);
  held_lock (&k->slot_lock);
  for (; b <= last && r == 0; ++b)
    if (!kept_slots_get (slots, b, place, &slot))
      r = kept_slots_take (slots, b, place, &slot);
    else
      *fresh = false;
  if (r == 0)
    grow_ahead (k);
  held_unlock (&k->slot_lock);
  /* Slots taken in order: the first is the lowest. */
  if (*fresh && kept_slots_get (slots, first, place, &slot))
    *fresh = slot >= k->kept.log.fresh_slots;
  return r;
}

/*----------------------------------------------------------------------
 * Version 7: the units the log watches (store-kept.h, watch_lock), which
 * a write or punch must not change unseen.
 */

/* Whether [offset, offset+count) meets a unit of the n entries. */
static bool
meets_units (const struct store_kept *k, const struct kept_log_entry *list,
             unsigned n, uint64_t offset, uint64_t count)
{
  const struct blockgeom *g = geom_of (k);
  unsigned shift = kept_unit_shift (&k->kept.header.layout), i;
  uint64_t end = offset + count;

  for (i = 0; i < n; ++i) {
    uint64_t start = blockgeom_start (g, list[i].b);
    uint64_t stop = blockgeom_end (g, list[i].b), lo, hi;

    if (list[i].units == 0 || end <= start || offset >= stop)
      continue;
    lo = (offset > start ? offset - start : 0) >> shift;
    hi = ((end < stop ? end : stop) - start - 1) >> shift;
    if (list[i].units >> lo & ((UINT64_C (2) << (hi - lo)) - 1))
      return true;
  }
  return false;
}

/* A record after the last is durable: its units need no watching. */
static void
unwatch_written (struct store_kept *k)
{
  held_lock (&k->watch_lock);
  free (k->written);
  k->written = NULL;
  k->nr_written = 0;
  __atomic_store_n (&k->watched, k->nr_taking, __ATOMIC_RELEASE);
  held_unlock (&k->watch_lock);
}

/* The record a flush took is written (now true: its units are the last
 * record's now) or given up.  Returns whether a write tainted it.
 */
static bool
end_taking (struct store_kept *k, bool now)
{
  bool tainted;

  held_lock (&k->watch_lock);
  tainted = k->tainted;
  if (now) {
    free (k->written);
    k->written = k->taking;
    k->nr_written = k->nr_taking;
  }
  else
    free (k->taking);
  k->taking = NULL;
  k->nr_taking = 0;
  k->tainted = false;
  __atomic_store_n (&k->watched, k->nr_written, __ATOMIC_RELEASE);
  held_unlock (&k->watch_lock);
  return tainted;
}

/* An empty record written after the last, durably: the last one's
 * units need no watching then.  Caller holds log_lock.  Returns 0, or
 * -1 with k->kept.why set.
 */
static int
write_confirming (struct store_kept *k) REQUIRES (k->log_lock)
{
  int r = kept_log_write (&k->kept, NULL, 0, 0, 0);

  if (r == 0)
    unwatch_written (k);
  return r;
}

/* The last record is no longer the log's last: an empty one written
 * after it, durably, unless a record has been since.  Returns 0, or -1
 * with *err set after nbdkit_error.
 */
static int
confirm_written (struct store_kept *k, uint64_t offset, uint64_t count,
                 int *err)
{
  bool still;
  int r = 0;

  held_lock (&k->log_lock);
  held_lock (&k->watch_lock);
  still = meets_units (k, k->written, k->nr_written, offset, count);
  held_unlock (&k->watch_lock);
  if (still && (r = write_confirming (k)) == -1) {
    *err = errno;
    report (k);
  }
  held_unlock (&k->log_lock);
  return r;
}

/* Before a write or punch of [offset, offset+count): a unit of the
 * record a flush is taking taints it (the flush then confirms it); a
 * unit of the last record is confirmed first.  The caller holds the
 * range's write locks, which a flush holds as it takes a unit, so
 * that the unit is watched before the change looks or after it ends.
 */
static int
watch_change (struct store_kept *k, uint64_t offset, uint64_t count, int *err)
{
  bool written;

  if (__atomic_load_n (&k->watched, __ATOMIC_ACQUIRE) == 0)
    return 0;
  held_lock (&k->watch_lock);
  if (meets_units (k, k->taking, k->nr_taking, offset, count))
    k->tainted = true;
  written = meets_units (k, k->written, k->nr_written, offset, count);
  held_unlock (&k->watch_lock);
  return written ? confirm_written (k, offset, count, err) : 0;
}

static int
kept_write (struct store *st, const void *buf, uint64_t count,
            uint64_t offset, unsigned place, int *err) REQUIRES (*st->stripes)
{
  struct store_kept *k = kept_of (st);
  uint64_t end = offset + count, pos = offset, stop, at;
  const char *p = buf;
  bool found, fresh;

  CHECK ((place == 0 || k->kept.header.layout.places) &&
         stripes_held (st->stripes, offset, count));
  if (watch_change (k, offset, count, err) == -1)
    return -1;
  if (take_slots (st, offset, end, place, &fresh) == -1)
    goto fail;
  /* Zeros into fresh slots: they read as zeros already.  A write of
   * zeros through fallocate would leave unwritten extents, which the
   * writes into the block then convert, one journal commit a sync.
   */
  if (fresh && p == NULL)
    return 0;
  for (; pos < end; pos = stop) {
    stop = data_run (k, pos, end, place, &found, &at);
    if (storeio_write (k->kept.fd, p, stop - pos, at) == -1)
      goto fail;
    if (p)
      p += stop - pos;
  }
  return 0;
 fail:
  storeio_report (buf ? "write" : "write of zeros", count, offset, err);
  return -1;
}

/* Retires the slots in place of the blocks from offset to stop, which
 * were punched whole; but a block's place-0 slot while it has one in
 * place 1, where its units may all lie: its entry names the block by
 * its place-0 slot.
 */
static void
retire_slots (struct store_kept *k, uint64_t offset, uint64_t stop,
              unsigned place)
{
  const struct blockgeom *g = geom_of (k);
  uint64_t b, slot;

  if (!k->kept.header.layout.packed)
    return;
  held_lock (&k->slot_lock);
  for (b = blockgeom_block (g, offset); blockgeom_start (g, b) < stop; ++b)
    if (place == 1 || !kept_slots_get (&k->kept.slots, b, 1, &slot))
      kept_slots_retire (&k->kept.slots, b, place);
  held_unlock (&k->slot_lock);
}

/* Punches the data of [offset, offset+count) in place, a run of the
 * file at a time: whole blocks with their slots retired, or units of
 * one block (the block keeps its slot).
 */
static int
kept_punch (struct store *st, uint64_t count, uint64_t offset,
            unsigned place) REQUIRES (*st->stripes)
{
  struct store_kept *k = kept_of (st);
  const struct blockgeom *g = geom_of (k);
  uint64_t end = offset + count, at, stop, len;
  int r = 0, saved_errno = 0;
  bool found, whole;

  CHECK ((place == 0 || k->kept.header.layout.places) &&
         stripes_held (st->stripes, offset, count));
  if (watch_change (k, offset, count, &saved_errno) == -1) {
    errno = saved_errno;
    return -1;
  }
  for (; offset < end; offset = stop) {
    stop = data_run (k, offset, end, place, &found, &at);
    if (!found)
      continue;
    whole = offset == blockgeom_start (g, blockgeom_block (g, offset)) &&
            (stop == g->size || stop == blockgeom_start (g,
                                                  blockgeom_block (g, stop)));
    /* The disk's short last block has a whole slot. */
    len = whole ? div_round_up (stop - offset, blockgeom_block_size (g))
                  << g->shift
                : stop - offset;
    if (punch_hole (k->kept.fd, at, len) == -1) {
      r = -1;
      saved_errno = errno;
    }
    if (whole)
      retire_slots (k, offset, stop, place);
  }
  errno = saved_errno;
  return r;
}

/*----------------------------------------------------------------------
 * The states, the dirty state pages and the flush
 * (docs/overlay-format.md says why its order is crash-safe without a
 * journal).
 */

/* The state pages holding blocks [first, first+n): their entries in
 * dirty_pages are [*page, *page + *pages).
 */
static void
state_pages_of (const struct store_kept *k, uint64_t first, uint64_t n,
                uint64_t *page, uint64_t *pages)
{
  uint64_t per_page = k->kept.header.layout.blocks_per_page;

  *page = first / per_page;
  *pages = (first + n - 1) / per_page - *page + 1;
}

static int
kept_reserve_blocks (struct store *st, uint64_t first, uint64_t n,
                     bool in_part)
{
  struct store_kept *k = kept_of (st);
  const struct kept_layout *l = &k->kept.header.layout;
  uint64_t page, pages;
  int r;

  state_pages_of (k, first, n, &page, &pages);
  held_lock (&k->page_lock);
  r = statemap_reserve (&k->states, first, n);
  if (r == 0)
    r = statemap_reserve (&k->dirty_pages, page, pages);
  if (r == 0 && in_part && l->part_shift)
    r = kept_parts_reserve (&k->kept, first);
  if (r == 0 && in_part && l->places)
    r = slotmap_reserve (&k->kept.where, first, 1);
  held_unlock (&k->page_lock);
  return r;
}

/* Version 6: the blocks of [b, end) that are held now have no unit in
 * place 1 any more, walking the runs of states as the map does
 * (blkmap.c, clear_locked): only held blocks can have one.
 */
static void
clear_where (struct store_kept *k, uint64_t b, uint64_t end)
  REQUIRES (k->page_lock)
{
  while (b < end) {
    unsigned state;
    uint64_t stop = statemap_run (&k->states, b, end, &state);

    for (; (state == KEPT_ALLOCATED || state == KEPT_PARTIAL) && b < stop;
         ++b)
      slotmap_set (&k->kept.where, b, 0);
    b = stop;
  }
}

/* Version 7: room in changed for one more entry, else overflow set.
 * Caller holds page_lock.
 */
static bool
room_changed (struct store_kept *k) REQUIRES (k->page_lock)
{
  struct kept_log_entry *more;
  unsigned cap;

  if (k->nr_changed < k->cap_changed)
    return true;
  cap = k->cap_changed ? 2 * k->cap_changed : 8;
  more = k->nr_changed < KEPT_LOG_ENTRIES
         ? realloc (k->changed, cap * sizeof *more) : NULL;
  if (more == NULL) {
    k->overflow = true;
    return false;
  }
  k->changed = more;
  k->cap_changed = cap;
  return true;
}

/* Version 7: where block b is in changed, or nr_changed.  Caller holds
 * page_lock.
 */
static unsigned
changed_at (const struct store_kept *k, uint64_t b) REQUIRES (k->page_lock)
{
  unsigned i;

  for (i = 0; i < k->nr_changed && k->changed[i].b != b; ++i)
    ;
  return i;
}

/* Version 7: blocks [first, first+n) are about to change (version 8:
 * or had their marks raised); each not changed since a flush last took
 * them is noted with its entry as it stands, which that flush took.
 * Past KEPT_LOG_ENTRIES, the next flush writes the pages.
 */
static void
note_changed (struct store_kept *k, uint64_t first, uint64_t n)
  REQUIRES (k->page_lock)
{
  uint64_t b;

  if (!logs (k))
    return;
  for (b = first; b < first + n && !k->overflow; ++b)
    if (changed_at (k, b) == k->nr_changed && room_changed (k))
      kept_entry_of (&k->kept, &k->states, b, &k->changed[k->nr_changed++]);
}

/* Requires kept_reserve_blocks of the blocks (in part, of a record of
 * one block held in part or with units in place 1).  A run's blocks
 * have no unit in place 1: where a run is set, its blocks were not
 * held, or are held no more.
 */
static void
kept_set_blocks (struct store *st, const struct store_blocks *r)
{
  struct store_kept *k = kept_of (st);
  uint64_t page, pages;

  state_pages_of (k, r->first, r->n, &page, &pages);
  held_lock (&k->page_lock);
  note_changed (k, r->first, r->n);
  if (r->state == BLK_PARTIAL)
    kept_parts_set (&k->kept, r->first, r->units);
  if (k->kept.header.layout.places && r->n == 1)
    slotmap_set (&k->kept.where, r->first, r->where);
  else if (k->kept.header.layout.places)
    clear_where (k, r->first, r->first + r->n);
  statemap_set (&k->states, r->first, r->n, r->state);
  statemap_set (&k->dirty_pages, page, pages, 1);
  held_unlock (&k->page_lock);
}

/* Version 5 keeps which sub-blocks a block holds, of blocks of 16K
 * on; a new file is made in version 5.  Its sub-blocks are the block
 * layer's (blkmap_start): 4K, or a 32nd of a block larger than 128K.
 */
static bool
kept_holds_parts (struct store *st)
{
  struct store_kept *k = kept_of (st);

  if (!k->kept.has_header)
    return k->block_size >= KEPT_PARTS_MIN_BLOCK;
  return k->kept.header.layout.part_shift != 0;
}

/*----------------------------------------------------------------------
 * Version 4: the history (docs/overlay-format.md says why the order of
 * MARKS_STALE and the flushes never lets the marks in the file miss a
 * change the file holds).
 */

static bool
kept_allows_checkpoints (struct store *st)
{
  return kept_of (st)->history;
}

static void
kept_note_checkpoints (struct store *st)
{
  struct store_kept *k = kept_of (st);

  held_lock (&k->page_lock);
  k->table_dirty = true;
  held_unlock (&k->page_lock);
}

/* Marks page page has a raised mark: its bit is set after the mark
 * (release), so a flush that takes the bit (acquire) reads the mark.
 */
static void
dirty_marks_page (struct store_kept *k, uint64_t page)
{
  uint64_t *word = &k->dirty_marks[page / 64], bit = UINT64_C (1) << page % 64;

  if ((__atomic_load_n (word, __ATOMIC_RELAXED) & bit) == 0)
    __atomic_fetch_or (word, bit, __ATOMIC_RELEASE);
}

/* Whether marks page page had a raised mark, clearing its bit. */
static bool
take_marks_page (struct store_kept *k, uint64_t page)
{
  uint64_t *word = &k->dirty_marks[page / 64], bit = UINT64_C (1) << page % 64;

  return (__atomic_load_n (word, __ATOMIC_RELAXED) & bit) != 0 &&
         (__atomic_fetch_and (word, ~bit, __ATOMIC_ACQUIRE) & bit) != 0;
}

static void
kept_note_marks (struct store *st, uint64_t first, uint64_t n)
{
  struct store_kept *k = kept_of (st);
  uint64_t page = first / KEPT_MARKS_PER_PAGE;
  uint64_t last = (first + n - 1) / KEPT_MARKS_PER_PAGE;

  for (; page <= last; ++page)
    dirty_marks_page (k, page);
  /* Version 8: the next record gives the blocks their marks, their
   * entries as they stand if they did not change.
   */
  if (logs_marks (k)) {
    held_lock (&k->page_lock);
    note_changed (k, first, n);
    held_unlock (&k->page_lock);
  }
}

/* Gives the file MARKS_STALE, durably, unless it has it.  Returns 0,
 * or -1 with errno set after nbdkit_error.
 */
static int
mark_stale (struct store_kept *k)
{
  struct kept_header *h = &k->kept.header;
  int r = 0;

  held_lock (&k->stale_lock);
  if (!__atomic_load_n (&k->stale, __ATOMIC_SEQ_CST)) {
    if (h->version >= KEPT_STALE_COUNT_VERSION)
      h->stale_count = h->stale_count % KEPT_STALE_COUNT_MAX + 1;
    r = kept_set_flags (&k->kept, h->flags | KEPT_MARKS_STALE,
                        h->recoveries);
    if (r == 0)
      __atomic_store_n (&k->stale, true, __ATOMIC_SEQ_CST);
    else
      report (k);
  }
  held_unlock (&k->stale_lock);
  return r;
}

/* Whether the marks of the flush in progress hold every change begun
 * before now: none was in flight when it began (ended was
 * ended_at_flush, which no change has begun past since), and none was
 * lost for want of memory (then the flag stays until the file is next
 * opened).  Read once stale is cleared: a change reads stale after it
 * counts itself begun, so either the flush sees the change or the
 * change sees the file unmarked and marks it again (waiting for the
 * lock).
 */
static bool
marks_hold_every_change (struct store_kept *k)
{
  return __atomic_load_n (&k->begun, __ATOMIC_SEQ_CST) == k->ended_at_flush &&
         !changes_lost (k->changes);
}

/* Clears MARKS_STALE after a flush whose marks hold every change
 * begun before it ended.
 */
static void
settle_stale (struct store_kept *k)
{
  struct kept_header *h = &k->kept.header;

  held_lock (&k->stale_lock);
  if (__atomic_load_n (&k->stale, __ATOMIC_SEQ_CST)) {
    __atomic_store_n (&k->stale, false, __ATOMIC_SEQ_CST);
    if (!marks_hold_every_change (k) ||
        kept_set_flags (&k->kept, h->flags & ~KEPT_MARKS_STALE,
                        h->recoveries) == -1)
      __atomic_store_n (&k->stale, true, __ATOMIC_SEQ_CST);
  }
  held_unlock (&k->stale_lock);
}

/* Version 9: the stale count the record of a flush clears, taken if
 * the file is marked stale and the record's marks will hold every
 * change begun before it ended, as settle_stale asks: the file counts
 * as unmarked from here on, so that a change begun meanwhile marks it
 * again (and settle_stale finds nothing to do).  0 if it clears none.
 */
static uint32_t
stale_to_clear (struct store_kept *k)
{
  uint32_t count = 0;

  if (!k->history || k->kept.header.version < KEPT_STALE_COUNT_VERSION)
    return 0;
  held_lock (&k->stale_lock);
  if (__atomic_load_n (&k->stale, __ATOMIC_SEQ_CST)) {
    __atomic_store_n (&k->stale, false, __ATOMIC_SEQ_CST);
    if (marks_hold_every_change (k))
      count = k->kept.header.stale_count;
    else
      __atomic_store_n (&k->stale, true, __ATOMIC_SEQ_CST);
  }
  held_unlock (&k->stale_lock);
  return count;
}

/* Version 9: after the record meant to clear stale count count.  If
 * it was written, the header's flag goes in memory too, unless a
 * change has set it again since (the file holds it, cleared by the
 * record); else the file counts as marked stale again.
 */
static void
stale_cleared (struct store_kept *k, uint32_t count, bool written)
{
  struct kept_header *h = &k->kept.header;

  held_lock (&k->stale_lock);
  if (!written)
    __atomic_store_n (&k->stale, true, __ATOMIC_SEQ_CST);
  else if (h->stale_count == count)
    h->flags &= ~KEPT_MARKS_STALE;
  held_unlock (&k->stale_lock);
}

/* Whether a change must find the file marked stale: while the overlay
 * has a checkpoint, or the file's table may still hold one.
 */
static bool
needs_marks (struct store_kept *k)
{
  return changes_any (k->changes) ||
         __atomic_load_n (&k->table_kept, __ATOMIC_SEQ_CST);
}

/* Version 8: a change needs the file marked stale only if it may
 * write in place into a block whose mark it raises (change_in_place):
 * else what it writes is read only once an entry names it, which
 * reaches the file with the mark, in a record or with the pages
 * (docs/overlay-format.md, "Why the marks never miss a change").
 */
static int
kept_change_begin (struct store *st, int *err)
{
  struct store_kept *k = kept_of (st);

  if (!k->history)
    return 0;
  __atomic_add_fetch (&k->begun, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n (&k->stale, __ATOMIC_SEQ_CST) || !needs_marks (k))
    return 0;
  if (logs_marks (k) && !__atomic_load_n (&k->taking_pages, __ATOMIC_SEQ_CST))
    return 1;
  if (mark_stale (k) == 0)
    return 0;
  *err = errno;
  __atomic_add_fetch (&k->ended, 1, __ATOMIC_SEQ_CST);
  return -1;
}

static int
kept_change_in_place (struct store *st, int *err)
{
  struct store_kept *k = kept_of (st);

  if (__atomic_load_n (&k->stale, __ATOMIC_SEQ_CST) || !needs_marks (k) ||
      mark_stale (k) == 0)
    return 0;
  *err = errno;
  return -1;
}

static void
kept_change_end (struct store *st)
{
  struct store_kept *k = kept_of (st);

  if (k->history)
    __atomic_add_fetch (&k->ended, 1, __ATOMIC_SEQ_CST);
}

/* The table taken by a flush was not written: the next flush writes it
 * with the same sequence, to the same copy, so that the other stays
 * whole.
 */
static void
redirty_table (struct store_kept *k)
{
  held_lock (&k->page_lock);
  k->table_dirty = true;
  k->table_sequence--;
  held_unlock (&k->page_lock);
}

/* The table as it stands, into buf, if it changed since it was last
 * written: returns whether it did, with *at where it goes.  A table
 * that holds a checkpoint is written only to a file marked stale
 * unless no change has been in flight since the flush began: a change
 * begun before the checkpoint was made may lie in the file unmarked.
 */
static bool
take_table (struct store_kept *k, uint64_t *at, uint8_t *buf)
{
  struct kept_table table;
  bool dirty;

  held_lock (&k->page_lock);
  dirty = k->table_dirty;
  if (dirty) {
    k->table_dirty = false;
    table.sequence = ++k->table_sequence;
    table.count = changes_list (k->changes, table.checkpoints,
                                &table.last_epoch);
  }
  held_unlock (&k->page_lock);
  if (!dirty)
    return false;
  k->table_taken = true;
  k->table_taken_count = table.count;
  if (table.count > 0) {
    __atomic_store_n (&k->table_kept, true, __ATOMIC_SEQ_CST);
    if (__atomic_load_n (&k->begun, __ATOMIC_SEQ_CST) != k->ended_at_flush &&
        mark_stale (k) == -1) {
      k->flush_errno = errno;
      redirty_table (k);
      return false;
    }
  }
  kept_table_encode (&table, buf);
  *at = kept_table_offset (&k->kept.header.layout, table.sequence);
  return true;
}

/* The kept_redirty_pages of a flush: the table (before the states),
 * state pages, marks pages (after them).  The state pages' entries in
 * dirty_pages exist (they were dirty), so this cannot fail.
 */
static void
redirty_pages (void *opaque, const uint64_t *at, unsigned n)
{
  struct store_kept *k = opaque;
  const struct kept_layout *l = &k->kept.header.layout;
  unsigned i;

  for (i = 0; i < n; ++i) {
    uint64_t p = (at[i] - l->states_offset) / KEPT_STATE_PAGE;

    if (at[i] < l->states_offset) {
      k->table_taken = false;
      redirty_table (k);
    }
    else if (p >= state_pages (k))
      dirty_marks_page (k, p - state_pages (k));
    else {
      held_lock (&k->page_lock);
      statemap_set (&k->dirty_pages, p, 1, 1);
      held_unlock (&k->page_lock);
    }
  }
}

/* The kept_take_pages of a flush, taking the pages in the order the
 * file holds them: the table first if it changed, then up to max of
 * the dirty state pages and marks pages from page *next - 1 on (marks
 * page m is page state_pages + m), into buf, marked clean.
 */
static unsigned
take_dirty_pages (void *opaque, uint64_t *next, uint64_t *at,
                  uint8_t *buf, unsigned max)
{
  struct store_kept *k = opaque;
  const struct kept_layout *l = &k->kept.header.layout;
  uint64_t states = state_pages (k), p;
  unsigned n = 0;

  if (*next == 0) {
    if (k->history && take_table (k, &at[0], buf))
      n = 1;
    *next = 1;
  }
  p = *next - 1;
  held_lock (&k->page_lock);
  while (p < states && n < max) {
    unsigned dirty;
    uint64_t end = statemap_run (&k->dirty_pages, p, states, &dirty);
    if (!dirty) {
      p = end;
      continue;
    }
    kept_export_page (&k->kept, &k->states, p, buf + n * KEPT_STATE_PAGE);
    statemap_set (&k->dirty_pages, p, 1, 0);
    at[n++] = l->states_offset + p++ * KEPT_STATE_PAGE;
  }
  held_unlock (&k->page_lock);
  for (; k->history && p < states + marks_pages (k) && n < max; ++p) {
    uint64_t m = p - states;

    /* 64 clean pages at a time. */
    if (m % 64 == 0 &&
        __atomic_load_n (&k->dirty_marks[m / 64], __ATOMIC_RELAXED) == 0) {
      p += 63;
      continue;
    }
    if (take_marks_page (k, m)) {
      kept_export_marks_page (&k->kept, changes_marks (k->changes), m,
                              buf + n * KEPT_STATE_PAGE);
      at[n++] = l->states_offset + p * KEPT_STATE_PAGE;
    }
  }
  *next = p + 1;
  return n;
}

/* Version 7: the entries the pages now hold need no record: those
 * taken before the first round, whose pages the rounds take.  Caller
 * holds page_lock.
 */
static void
forget_changed (struct store_kept *k) REQUIRES (k->page_lock)
{
  k->nr_changed = 0;
  k->overflow = false;
}

/* Version 7: the log emptied once the pages hold all it held (always,
 * or only if it holds a record), noting dropped, or if not always the
 * blocks the last recovery dropped; nothing is watched then, since no
 * record is left to check.
 */
static int
empty_log (struct store_kept *k, bool always, uint32_t dropped)
{
  int r = 0;

  held_lock (&k->log_lock);
  if (always || k->kept.log.records > 0 || k->kept.log.failed)
    r = kept_log_reset (&k->kept,
                        always ? dropped : k->kept.log.dropped_before);
  if (r == 0)
    unwatch_written (k);
  held_unlock (&k->log_lock);
  return r;
}

/* The flush that writes the pages (docs/overlay-format.md): what ended
 * was as it began, which settle_stale compares with what begun is as
 * it ends.  Version 7: then the log emptied, if it holds a record.  A
 * flush that fails leaves overflow set, so that the next writes the
 * pages again.
 */
static int
flush_pages (struct store_kept *k, int *err)
{
  if (logs (k)) {
    held_lock (&k->page_lock);
    forget_changed (k);
    held_unlock (&k->page_lock);
  }
  k->flush_errno = 0;
  k->table_taken = false;
  if (kept_flush (&k->kept, take_dirty_pages, redirty_pages, k) == -1 ||
      (logs (k) && empty_log (k, false, 0) == -1)) {
    *err = errno;
    report (k);
    goto fail;
  }
  if (k->flush_errno != 0) {
    *err = k->flush_errno;
    goto fail;
  }
  if (k->table_taken)
    __atomic_store_n (&k->table_kept, k->table_taken_count > 0,
                      __ATOMIC_SEQ_CST);
  return 0;
 fail:
  if (logs (k)) {
    held_lock (&k->page_lock);
    k->overflow = true;
    held_unlock (&k->page_lock);
  }
  return -1;
}

/* The data's sync: what a flush that changed no entry (only data
 * written, into units the overlay held) makes durable, and what a
 * flush of the pages syncs before it marks the file stale.
 */
static int
sync_data (struct store_kept *k, int *err)
{
  if (fdatasync (k->kept.fd) == 0)
    return 0;
  *err = errno;
  nbdkit_error ("cow-file=%s: flush: %m", k->kept.path);
  return -1;
}

/* Version 8: flush_pages while the overlay needs marks.  The pages
 * may name a change in flight, its mark not raised yet: the file is
 * marked stale if one is in flight as they begin to be taken, and a
 * change begun while they are marks it itself (change_begin), the
 * one or the other seeing the other's count or flag.  With none in
 * flight, as around a checkpoint made or deleted, the marks stay
 * exact at every crash.
 */
static int
flush_pages_marked (struct store_kept *k, int *err)
{
  int r = 0;

  /* What the clients wrote since their last flush is synced first,
   * while their changes still take the log's way: marking the file
   * stale syncs the header, and a change begun meanwhile waits for
   * that sync, which then has little left to write.
   */
  if (!__atomic_load_n (&k->stale, __ATOMIC_SEQ_CST) &&
      sync_data (k, err) == -1)
    return -1;
  __atomic_store_n (&k->taking_pages, true, __ATOMIC_SEQ_CST);
  if (__atomic_load_n (&k->begun, __ATOMIC_SEQ_CST) !=
      __atomic_load_n (&k->ended, __ATOMIC_SEQ_CST) &&
      mark_stale (k) == -1) {
    *err = errno;
    r = -1;
  }
  if (r == 0)
    r = flush_pages (k, err);
  __atomic_store_n (&k->taking_pages, false, __ATOMIC_SEQ_CST);
  return r;
}

/* Whether a marks page has a raised mark not yet written. */
static bool
marks_dirty (const struct store_kept *k)
{
  uint64_t w;

  for (w = 0; k->history && w < div_round_up (marks_pages (k), 64); ++w)
    if (__atomic_load_n (&k->dirty_marks[w], __ATOMIC_RELAXED) != 0)
      return true;
  return false;
}

/* Version 7: the entries taken by a flush whose record was not written
 * are changed again, as they were before it took them.
 */
static void
retake_changed (struct store_kept *k, const struct kept_log_entry *old,
                unsigned n)
{
  unsigned i, j;

  held_lock (&k->page_lock);
  for (i = 0; i < n && !k->overflow; ++i) {
    j = changed_at (k, old[i].b);
    if (j < k->nr_changed)
      k->changed[j] = old[i];
    else if (room_changed (k))
      k->changed[k->nr_changed++] = old[i];
  }
  held_unlock (&k->page_lock);
}

/* Version 7: takes block e->b's entry as it stands, the units it names
 * where old did not, and their checksum, watched (taking) until a
 * record after this one is durable.  holder holds the block's write
 * locks from before the units' bytes are read to after they are
 * watched, so that a write into the block comes before or finds them
 * watched.
 */
static int
take_entry (struct store_kept *k, const struct store_holder *holder,
            const struct kept_log_entry *old, struct kept_log_entry *e)
{
  const struct blockgeom *g = geom_of (k);
  uint64_t start = blockgeom_start (g, old->b);
  uint64_t len = blockgeom_end (g, old->b) - start;
  int r;

  holder->hold (holder->opaque, start, len);
  held_lock (&k->page_lock);
  kept_entry_of (&k->kept, &k->states, old->b, e);
  held_unlock (&k->page_lock);
  e->units = kept_new_units (&k->kept, old, e);
  r = kept_log_sum (&k->kept, e);
  held_lock (&k->watch_lock);
  k->taking[k->nr_taking++] = *e;
  __atomic_store_n (&k->watched, k->nr_written + k->nr_taking,
                    __ATOMIC_RELEASE);
  held_unlock (&k->watch_lock);
  holder->release (holder->opaque, start, len);
  return r;
}

/* Version 7: the record written, then what it took watched as the
 * last record's; a record tainted meanwhile is followed by an empty
 * one, so that its checksums are never the last.  Caller holds
 * log_lock.
 */
static int
write_record (struct store_kept *k, const struct kept_log_entry *entries,
              unsigned n, uint32_t mark, uint32_t clears)
  REQUIRES (k->log_lock)
{
  int r = kept_log_write (&k->kept, entries, n, mark, clears);

  if (end_taking (k, r == 0) && r == 0)
    r = write_confirming (k);
  return r;
}

/* Version 7: the flush of one sync (docs/overlay-format.md, "The
 * log"): the entries changed since the last flush as a record, written
 * and synced with the data they name.  Returns 1 if it cannot (too
 * many, the table or marks changed, the log full): the pages are
 * written then.  Else 0, or -1 with *err set.
 */
static int
flush_log (struct store_kept *k, const struct store_holder *holder, int *err)
{
  struct kept_log_entry *old, *e, *taking;
  unsigned n, i;
  uint64_t bytes = 0;
  uint32_t mark, clears;
  int r = 0;

  held_lock (&k->page_lock);
  n = k->nr_changed;
  if (k->overflow || k->table_dirty || n > KEPT_LOG_ENTRIES ||
      (!logs_marks (k) && marks_dirty (k))) {
    held_unlock (&k->page_lock);
    return 1;
  }
  if (n == 0) {
    held_unlock (&k->page_lock);
    return sync_data (k, err);
  }
  old = malloc (2 * n * sizeof *old);
  taking = malloc (n * sizeof *taking);
  if (old == NULL || taking == NULL) {
    held_unlock (&k->page_lock);
    free (old);
    free (taking);
    return 1;
  }
  memcpy (old, k->changed, n * sizeof *old);
  k->nr_changed = 0;
  held_unlock (&k->page_lock);
  e = old + n;
  held_lock (&k->watch_lock);
  k->taking = taking;
  held_unlock (&k->watch_lock);
  for (i = 0; i < n && r == 0; ++i) {
    r = take_entry (k, holder, &old[i], &e[i]);
    bytes += (uint64_t) __builtin_popcount (e[i].units)
             << kept_unit_shift (&k->kept.header.layout);
  }
  /* Read once the entries are taken: at least any mark they had. */
  mark = logs_marks (k) ? changes_last_epoch (k->changes) : 0;
  clears = r == 0 ? stale_to_clear (k) : 0;
  held_lock (&k->log_lock);
  if (r == 0 && bytes <= KEPT_LOG_DATA && kept_log_room (&k->kept, n))
    r = write_record (k, e, n, mark, clears);
  else {
    end_taking (k, false);
    if (r == 0)
      r = 1;
  }
  held_unlock (&k->log_lock);
  if (clears != 0)
    stale_cleared (k, clears, r == 0);
  if (r != 0)
    retake_changed (k, old, n);
  if (r == -1) {
    *err = errno;
    report (k);
  }
  free (old);
  return r;
}

static int
kept_store_flush (struct store *st, const struct store_holder *holder,
                  int *err)
{
  struct store_kept *k = kept_of (st);
  int r = 1;

  if (!k->started)
    return 0;
  k->ended_at_flush = __atomic_load_n (&k->ended, __ATOMIC_SEQ_CST);
  if (logs (k) && holder)
    r = flush_log (k, holder, err);
  if (r == 1 && logs_marks (k) && needs_marks (k))
    r = flush_pages_marked (k, err);
  else if (r == 1)
    r = flush_pages (k, err);
  if (r == 0 && k->history)
    settle_stale (k);
  return r;
}

int
kept_fold_log (struct store_kept *k, uint32_t dropped)
{
  const struct kept_log *log = &k->kept.log;
  uint64_t i, page, pages;
  int err;

  if (log->records == 0 && dropped == 0)
    return 0;
  held_lock (&k->page_lock);
  for (i = 0; i < log->nr_blocks; ++i) {
    if (log->marks[i] != 0 && k->history)
      dirty_marks_page (k, log->blocks[i] / KEPT_MARKS_PER_PAGE);
    state_pages_of (k, log->blocks[i], 1, &page, &pages);
    if (statemap_reserve (&k->dirty_pages, page, 1) == -1) {
      held_unlock (&k->page_lock);
      nbdkit_error ("cow-file=%s: %m", k->kept.path);
      return -1;
    }
    statemap_set (&k->dirty_pages, page, 1, 1);
  }
  held_unlock (&k->page_lock);
  k->kept.log.dropped_before = dropped;
  if (flush_pages (k, &err) == -1)
    return -1;
  if (dropped > 0 && log->records == 0 && empty_log (k, true, dropped) == -1) {
    report (k);
    return -1;
  }
  return 0;
}

/*----------------------------------------------------------------------
 * The rest of the store's life.
 */

static unsigned
kept_files (struct store *st)
{
  return 1;
}

static uint64_t
kept_bytes (struct store *st, uint64_t data_bytes)
{
  (void) data_bytes;
  return disk_bytes (kept_of (st)->kept.fd);
}

void
kept_free (struct store_kept *k)
{
  kept_close (&k->kept);
  statemap_free (&k->states);
  statemap_free (&k->dirty_pages);
  free (k->dirty_marks);
  free (k->changed);
  free (k->taking);
  free (k->written);
  held_destroy (&k->page_lock);
  held_destroy (&k->slot_lock);
  held_destroy (&k->stale_lock);
  held_destroy (&k->log_lock);
  held_destroy (&k->watch_lock);
  free (k->name);
  free (k);
}

/* A clean stop: what clients wrote is kept, flushed or not, and the
 * file is marked closed cleanly (and a packed one cut after its last
 * slot), unless the flush failed: then it stays marked open, with the
 * failure noted for nbdcow, and the next start recovers what was
 * flushed before.  Marks that may miss a change stay marked so: those
 * the failed flush did not write, or that the filter lost for want of
 * memory.
 */
static int
kept_store_close (struct store *st)
{
  struct store_kept *k = kept_of (st);
  uint32_t recoveries = k->kept.header.recoveries;
  int err, r = 0;

  if (k->started) {
    if (flush_pages (k, &err) == -1) {
      nbdkit_error ("cow-file=%s: the last flush failed: %s: the file holds "
                    "what was flushed before", k->kept.path, strerror (err));
      kept_set_flags (&k->kept, KEPT_OPEN | KEPT_FLUSH_FAILED |
                      (k->kept.header.flags & KEPT_MARKS_STALE), recoveries);
      r = -1;
    }
    else if (kept_set_flags (&k->kept, k->history && changes_lost (k->changes)
                             ? KEPT_MARKS_STALE : 0, recoveries) == -1) {
      report (k);
      r = -1;
    }
    else
      kept_cut (&k->kept);
  }
  kept_free (k);
  return r;
}

const struct store_ops kept_store_ops = {
  .start = kept_start,
  .made_size = kept_made_size,
  .check_size = kept_check_size,
  .facts = kept_facts,
  .keep_facts = kept_keep_facts,
  .holds_places = kept_holds_places,
  .begin_places = kept_begin_places,
  .end_places = kept_end_places,
  .read = kept_read,
  .write = kept_write,
  .punch = kept_punch,
  .loaded_blocks = kept_loaded_blocks,
  .reserve_blocks = kept_reserve_blocks,
  .set_blocks = kept_set_blocks,
  .holds_parts = kept_holds_parts,
  .allows_checkpoints = kept_allows_checkpoints,
  .note_checkpoints = kept_note_checkpoints,
  .note_marks = kept_note_marks,
  .change_begin = kept_change_begin,
  .change_in_place = kept_change_in_place,
  .change_end = kept_change_end,
  .flush = kept_store_flush,
  .files = kept_files,
  .bytes = kept_bytes,
  .close = kept_store_close,
};

