/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A kept overlay's data area where it holds no block: what a crash
 * left there of unflushed writes, punched, cut off or counted, with the
 * metadata pages a view allocated that hold only zeros; and the whole
 * data area when the overlay is emptied (kept.h).
 */

#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fullio.h"
#include "internal.h"
#include "iszero.h"
#include "pieces.h"
#include "punch.h"

/* What each_unused_range calls for a range [from, to) of the data
 * area (offsets from data_offset).
 */
typedef int unused_range_fn (struct kept_overlay *ko, uint64_t from,
                             uint64_t to, void *opaque);

/* Unpacked: fn for the runs of blocks that states does not hold
 * allocated.
 */
static int
each_unallocated_run (struct kept_overlay *ko, const struct statemap *states,
                      unused_range_fn *fn, void *opaque)
{
  const struct kept_layout *l = &ko->header.layout;
  uint64_t blocks = kept_blocks (ko), b = 0;

  while (b < blocks) {
    unsigned state;
    uint64_t end = statemap_run (states, b, blocks, &state);

    if (state != KEPT_ALLOCATED &&
        fn (ko, blockgeom_start (&l->geom, b), blockgeom_end (&l->geom, end - 1),
            opaque) == -1)
      return -1;
    b = end;
  }
  return 0;
}

/* Packed: fn for the runs of slots not taken, then for whatever the
 * file holds past the last slot taken.
 */
static int
each_free_slot_run (struct kept_overlay *ko, const struct kept_slots *slots,
                    unused_range_fn *fn, void *opaque)
{
  const struct kept_layout *l = &ko->header.layout;
  uint64_t end = kept_slots_end (slots), s = 0;
  struct stat st;

  while (s < end) {
    uint64_t t = s;

    while (t < end && !kept_slots_is_taken (slots, t))
      t++;
    if (t > s && fn (ko, blockgeom_start (&l->geom, s),
                     blockgeom_start (&l->geom, t), opaque) == -1)
      return -1;
    s = t + 1;                  /* t is taken, or the end */
  }
  if (fstat (ko->fd, &st) == -1)
    return kept_fail (ko, false, "fstat: %m");
  if ((uint64_t) st.st_size > l->data_offset + blockgeom_start (&l->geom, end))
    return fn (ko, blockgeom_start (&l->geom, end), st.st_size - l->data_offset,
               opaque);
  return 0;
}

/* fn for the runs of units in slot of block b in bits: of the whole
 * slot, which the disk's short last block has too.
 */
static int
each_unit_run (struct kept_overlay *ko, uint64_t b, uint64_t slot,
               uint32_t bits, unused_range_fn *fn, void *opaque)
{
  const struct kept_layout *l = &ko->header.layout;
  uint64_t start = blockgeom_start (&l->geom, b);
  uint64_t stop = start + blockgeom_block_size (&l->geom);
  uint64_t at_slot = blockgeom_start (&l->geom, slot), at, next;
  struct piece_runs runs = piece_runs (start, kept_unit_shift (l), bits,
                                       start, stop);

  while (piece_runs_next (&runs, &at, &next))
    if (fn (ko, at_slot + (at - start), at_slot + (next - start),
            opaque) == -1)
      return -1;
  return 0;
}

/* What each_other_place passes through slotmap_each. */
struct other_place {
  struct kept_overlay *ko;
  unused_range_fn *fn;
  void *opaque;
};

/* The slotmap_each_fn of each_other_place: block b, its units in
 * place 1 where.
 */
static int
other_place_of (uint64_t b, uint32_t where, void *opaque)
{
  struct other_place *o = opaque;
  const struct kept_slots *slots = &o->ko->slots;
  uint64_t slot[2];

  if (!kept_slots_get (slots, b, 0, &slot[0]) ||
      !kept_slots_get (slots, b, 1, &slot[1]))
    return 0;
  if (each_unit_run (o->ko, b, slot[0], where, o->fn, o->opaque) == -1 ||
      each_unit_run (o->ko, b, slot[1], ~where, o->fn, o->opaque) == -1)
    return -1;
  return 0;
}

/* Version 6: fn for each run of units of a block with units in place 1
 * in the place they do not lie in (what only a view kept), stopping at
 * the first that returns -1.
 */
static int
each_other_place (struct kept_overlay *ko, unused_range_fn *fn, void *opaque)
{
  struct other_place o = { .ko = ko, .fn = fn, .opaque = opaque };

  if (!ko->header.layout.places)
    return 0;
  return slotmap_each (&ko->where, other_place_of, &o) == -1 ? -1 : 0;
}

/* Calls fn for each range of the data area that holds no block of the
 * overlay, stopping at the first that returns -1.
 */
static int
each_unused_range (struct kept_overlay *ko, const struct statemap *states,
                   unused_range_fn *fn, void *opaque)
{
  if (!ko->header.layout.packed)
    return each_unallocated_run (ko, states, fn, opaque);
  if (each_other_place (ko, fn, opaque) == -1)
    return -1;
  return each_free_slot_run (ko, &ko->slots, fn, opaque);
}

/* Cuts the file to length bytes if it is longer.  Callers take it as
 * best effort, as punch_run: a longer file only keeps the space.
 */
static int
shorten (struct kept_overlay *ko, uint64_t length)
{
  struct stat st;

  if (fstat (ko->fd, &st) == -1 || (uint64_t) st.st_size <= length)
    return 0;
  return ftruncate (ko->fd, length);
}

static int
punch_run (struct kept_overlay *ko, uint64_t from, uint64_t to, void *opaque)
{
  /* Best effort: a filesystem without holes only keeps the space. */
  punch_hole (ko->fd, ko->header.layout.data_offset + from, to - from);
  return 0;
}

/* What each_zero_metadata_run calls for a run [from, to) of the file. */
typedef int file_range_fn (struct kept_overlay *ko, uint64_t from,
                           uint64_t to, void *opaque);

/* fn for each run of pages of the metadata (the table, the states and
 * the marks) that the file holds on disk and that read as zeros: what
 * a view allocated ahead (kept_begin_places of the filter) and a crash
 * kept from being punched when it ended.  Holes are skipped unread.
 */
static int
each_zero_metadata_run (struct kept_overlay *ko, file_range_fn *fn,
                        void *opaque)
{
  const struct kept_layout *l = &ko->header.layout;
  off_t at = l->history ? l->table_offset : l->states_offset;
  off_t end = l->history ? l->marks_offset + l->marks_length
                         : l->states_offset + l->states_length;
  size_t chunk = PAGES_PER_IO * KEPT_STATE_PAGE;
  uint8_t *buf = malloc (chunk);
  int r = 0;

  if (buf == NULL)
    return kept_fail (ko, false, "malloc: %m");
  while (r == 0 && at < end) {
    off_t data = lseek (ko->fd, at, SEEK_DATA), stop, p, zero;

    if (data == -1 || data >= end)
      break;                    /* ENXIO: no data after at */
    data -= (data - at) % KEPT_STATE_PAGE;
    stop = lseek (ko->fd, data, SEEK_HOLE);
    if (stop == -1 || stop > end)
      stop = end;
    if ((size_t) (stop - data) > chunk)
      stop = data + chunk;
    stop -= (stop - data) % KEPT_STATE_PAGE;
    if (stop == data)
      stop = data + KEPT_STATE_PAGE;
    if (pread_full (ko->fd, buf, stop - data, data) == -1) {
      r = kept_fail (ko, false, "cannot read the metadata: %m");
      break;
    }
    for (p = data; r == 0 && p < stop; p = zero) {
      for (zero = p; zero < stop && is_zero ((const char *) buf + (zero - data),
                                             KEPT_STATE_PAGE);
           zero += KEPT_STATE_PAGE)
        ;
      if (zero > p)
        r = fn (ko, p, zero, opaque);
      else
        zero = p + KEPT_STATE_PAGE;
    }
    at = stop;
  }
  free (buf);
  return r;
}

static int
punch_file_run (struct kept_overlay *ko, uint64_t from, uint64_t to,
                void *opaque)
{
  (void) opaque;
  punch_hole (ko->fd, from, to - from);
  return 0;
}

void
kept_punch_unallocated (struct kept_overlay *ko, const struct statemap *states)
{
  kept_cut (ko);
  each_unused_range (ko, states, punch_run, NULL);
  /* Best effort, as punch_run: a failed read only keeps the space. */
  each_zero_metadata_run (ko, punch_file_run, NULL);
}

void
kept_cut (struct kept_overlay *ko)
{
  const struct kept_layout *l = &ko->header.layout;

  /* A state page may name a slot past the last one taken until the log
   * that moved its block out is folded into the pages.
   */
  if (l->packed && ko->log.records == 0)
    shorten (ko, l->data_offset
                 + blockgeom_start (&l->geom, kept_slots_end (&ko->slots)));
}

/* Adds to *opaque the bytes of [from, to) of the data area that hold
 * data on disk, as lseek's SEEK_DATA and SEEK_HOLE find them.
 */
static int
count_data_run (struct kept_overlay *ko, uint64_t from, uint64_t to,
                void *opaque)
{
  uint64_t *bytes = opaque;
  off_t base = ko->header.layout.data_offset, at = base + from;
  off_t end = base + to;

  while (at < end) {
    off_t data = lseek (ko->fd, at, SEEK_DATA), hole;
    if (data == -1 && errno == ENXIO)
      return 0;
    if (data == -1)
      return kept_fail (ko, false, "lseek: %m");
    if (data >= end)
      return 0;
    hole = lseek (ko->fd, data, SEEK_HOLE);
    if (hole == -1)
      return kept_fail (ko, false, "lseek: %m");
    *bytes += (hole < end ? hole : end) - data;
    at = hole;
  }
  return 0;
}

static int
count_file_run (struct kept_overlay *ko, uint64_t from, uint64_t to,
                void *opaque)
{
  (void) ko;
  *(uint64_t *) opaque += to - from;
  return 0;
}

int
kept_leaked_bytes (struct kept_overlay *ko, const struct statemap *states,
                   uint64_t *bytes)
{
  *bytes = 0;
  if (each_unused_range (ko, states, count_data_run, bytes) == -1)
    return -1;
  return each_zero_metadata_run (ko, count_file_run, bytes);
}


int
kept_empty (struct kept_overlay *ko)
{
  const struct kept_layout *l = &ko->header.layout;
  int r = kept_clear_history (ko);

  if (r == 0)
    r = kept_zero_area (ko, l->states_offset, l->states_length,
                        "block states");
  if (r == 0 && l->log_length)
    r = kept_zero_area (ko, l->log_offset, l->log_length, "log");
  if (r == 0 && fdatasync (ko->fd) == -1)
    r = kept_fail (ko, false, "fdatasync: %m");
  /* Packed, the data area goes whole, its few extents with it. */
  if (r == 0 && l->packed)
    shorten (ko, l->data_offset);
  else if (r == 0)
    punch_run (ko, 0, l->geom.size, NULL);
  return r;
}
