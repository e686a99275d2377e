/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block map (blkmap.h). */

#include <config.h>

#include "blkmap.h"
#include "lockranks.h"

/* Runs of states looked at per hold of state_lock by blkmap_count. */
#define COUNT_RUNS_PER_LOCK 1024

void
blkmap_init (struct blkmap *map, uint32_t block_size, struct lockwaits *waits)
{
  map->geom = blockgeom_make (block_size, 0);
  countedlock_init (&map->state_lock, waits, BLK_LOCK_STATE,
                    LOCK_RANK_STATE);
  map->states = (struct statemap) STATEMAP_INIT;
  map->unit_shift = map->geom.shift;
  map->units = (struct slotmap) SLOTMAP_INIT;
  map->places = false;
  map->where = (struct slotmap) SLOTMAP_INIT;
  map->view_on = false;
  map->view_state = (struct slotmap) SLOTMAP_INIT;
  map->view_held = (struct slotmap) SLOTMAP_INIT;
  map->view_where = (struct slotmap) SLOTMAP_INIT;
  map->view_mark = (struct slotmap) SLOTMAP_INIT;
}

void
blkmap_free (struct blkmap *map)
{
  statemap_free (&map->states);
  slotmap_free (&map->units);
  slotmap_free (&map->where);
  blkmap_view_free (map);
  countedlock_destroy (&map->state_lock);
}

int
blkmap_start (struct blkmap *map, bool sub_blocks)
{
  unsigned shift = map->geom.shift;
  unsigned sub_shift = blockgeom_sub_shift (&map->geom);
  if (!sub_blocks || sub_shift >= shift)
    return 0;
  if (slotmap_init (&map->units, blockgeom_blocks (&map->geom)) == -1)
    return -1;
  map->unit_shift = sub_shift;
  return 0;
}

/* The units block b holds now, in state. */
static uint32_t
held_units_locked (struct blkmap *map, uint64_t b, enum blk_state state)
  REQUIRES (map->state_lock)
{
  if (state == BLK_ALLOCATED)
    return blkmap_all_units (map, b);
  return state == BLK_PARTIAL ? slotmap_get (&map->units, b) : 0;
}

static void
get_live_locked (struct blkmap *map, uint64_t b, struct blkmap_held *held)
  REQUIRES (map->state_lock)
{
  held->state = statemap_get (&map->states, b);
  held->units = held_units_locked (map, b, held->state);
  held->where = map->places && held->units ? slotmap_get (&map->where, b) : 0;
}

/* The record of b, if the view has one: returns whether it has. */
static bool
get_record_locked (struct blkmap *map, uint64_t b, struct blkmap_held *held)
  REQUIRES (map->state_lock)
{
  uint32_t state;

  if (map->view_state.entries == 0 ||
      (state = slotmap_get (&map->view_state, b)) == 0)
    return false;
  held->state = state - 1;
  held->units = slotmap_get (&map->view_held, b);
  held->where = slotmap_get (&map->view_where, b);
  return true;
}

void
blkmap_get_held (struct blkmap *map, uint64_t b, bool in_view,
                 struct blkmap_held *held)
{
  blkmap_lock (map);
  if (!in_view || !get_record_locked (map, b, held))
    get_live_locked (map, b, held);
  blkmap_unlock (map);
}

int
blkmap_reserve_held (struct blkmap *map, uint64_t b)
{
  int r;

  blkmap_lock (map);
  r = statemap_reserve (&map->states, b, 1);
  if (r == 0 && blkmap_holds_parts (map))
    r = slotmap_reserve (&map->units, b, 1);
  if (r == 0 && map->places)
    r = slotmap_reserve (&map->where, b, 1);
  if (r == 0 && map->view_on)
    r = slotmap_reserve (&map->view_state, b, 1) ||
        slotmap_reserve (&map->view_held, b, 1) ||
        slotmap_reserve (&map->view_where, b, 1) ||
        slotmap_reserve (&map->view_mark, b, 1) ? -1 : 0;
  blkmap_unlock (map);
  return r;
}

enum blk_state
blkmap_set_held (struct blkmap *map, uint64_t b, uint32_t units,
                 uint32_t where)
{
  enum blk_state state = units == blkmap_all_units (map, b)
                         ? BLK_ALLOCATED : BLK_PARTIAL;

  CHECK (units != 0 &&
         (state == BLK_ALLOCATED || blkmap_holds_parts (map)));
  CHECK ((where & ~units) == 0 && (map->places || where == 0));
  blkmap_lock (map);
  if (blkmap_holds_parts (map))
    slotmap_set (&map->units, b, state == BLK_PARTIAL ? units : 0);
  if (map->places)
    slotmap_set (&map->where, b, where);
  statemap_set (&map->states, b, 1, state);
  blkmap_unlock (map);
  return state;
}

void
blkmap_record (struct blkmap *map, uint64_t b, bool make, uint32_t mark,
               struct blkmap_held *now, struct blkmap_held *kept)
{
  blkmap_lock (map);
  get_live_locked (map, b, now);
  *kept = *now;
  if (!map->view_on)
    kept->units = kept->where = 0;
  else if (!get_record_locked (map, b, kept) && make) {
    slotmap_set (&map->view_state, b, now->state + 1);
    slotmap_set (&map->view_held, b, now->units);
    slotmap_set (&map->view_where, b, now->where);
    slotmap_set (&map->view_mark, b, mark);
  }
  blkmap_unlock (map);
}

uint32_t
blkmap_view_mark (struct blkmap *map, uint64_t b, uint32_t mark)
{
  blkmap_lock (map);
  if (map->view_state.entries != 0 && slotmap_get (&map->view_state, b) != 0)
    mark = slotmap_get (&map->view_mark, b);
  blkmap_unlock (map);
  return mark;
}

/* Makes the map of places if there is none yet.  Returns 0, or -1 with
 * errno set.
 */
static int
places_begin_locked (struct blkmap *map) REQUIRES (map->state_lock)
{
  if (map->places)
    return 0;
  if (slotmap_init (&map->where, blockgeom_blocks (&map->geom)) == -1)
    return -1;
  __atomic_store_n (&map->places, true, __ATOMIC_RELEASE);
  return 0;
}

int
blkmap_places_begin (struct blkmap *map)
{
  int r;

  blkmap_lock (map);
  r = places_begin_locked (map);
  blkmap_unlock (map);
  return r;
}

int
blkmap_view_begin (struct blkmap *map)
{
  uint64_t blocks = blockgeom_blocks (&map->geom);
  int r;

  blkmap_lock (map);
  r = places_begin_locked (map);
  if (r == 0 && (slotmap_init (&map->view_state, blocks) == -1 ||
                 slotmap_init (&map->view_held, blocks) == -1 ||
                 slotmap_init (&map->view_where, blocks) == -1 ||
                 slotmap_init (&map->view_mark, blocks) == -1))
    r = -1;
  if (r == 0)
    map->view_on = true;
  blkmap_unlock (map);
  if (r == -1)
    blkmap_view_free (map);
  return r;
}

void
blkmap_view_end (struct blkmap *map)
{
  blkmap_lock (map);
  map->view_on = false;
  blkmap_unlock (map);
}

void
blkmap_view_free (struct blkmap *map)
{
  struct slotmap records[4];
  unsigned i;

  blkmap_lock (map);
  CHECK (!map->view_on);
  records[0] = map->view_state;
  records[1] = map->view_held;
  records[2] = map->view_where;
  records[3] = map->view_mark;
  map->view_state = map->view_held = map->view_where = map->view_mark =
    (struct slotmap) SLOTMAP_INIT;
  blkmap_unlock (map);
  for (i = 0; i < 4; ++i)
    slotmap_free (&records[i]);
}

struct each_record {
  int (*fn) (uint64_t b, void *opaque);
  void *opaque;
};

static int
call_for_record (uint64_t b, uint32_t state, void *opaque)
{
  struct each_record *each = opaque;

  (void) state;
  return each->fn (b, each->opaque);
}

int
blkmap_each_record (struct blkmap *map, int (*fn) (uint64_t b, void *opaque),
                    void *opaque)
{
  struct each_record each = { .fn = fn, .opaque = opaque };

  CHECK (!map->view_on);
  if (map->view_state.entries == 0)
    return 0;
  return slotmap_each (&map->view_state, call_for_record, &each) ? -1 : 0;
}

/* Clears the entries in entries of the blocks of [first, stop) that
 * are partial, or held at all (allocated too) with held.
 */
static void
clear_locked (struct blkmap *map, struct slotmap *entries, bool held,
              uint64_t first, uint64_t stop) REQUIRES (map->state_lock)
{
  uint64_t b = first;

  while (b < stop) {
    unsigned state;
    uint64_t end = statemap_run (&map->states, b, stop, &state);

    for (; (state == BLK_PARTIAL || (held && state == BLK_ALLOCATED)) &&
           b < end; ++b)
      slotmap_set (entries, b, 0);
    b = end;
  }
}

void
blkmap_set (struct blkmap *map, uint64_t first, uint64_t n,
            enum blk_state state)
{
  CHECK (state != BLK_PARTIAL);
  blkmap_lock (map);
  if (blkmap_holds_parts (map))
    clear_locked (map, &map->units, false, first, first + n);
  if (map->places && state != BLK_ALLOCATED)
    clear_locked (map, &map->where, true, first, first + n);
  statemap_set (&map->states, first, n, state);
  blkmap_unlock (map);
}

/* Whether a write may change units of b, which holds them as held
 * says, in place: no view keeps them there.  A record is heeded until
 * it is freed, after its view broke too: a write of the rmw path that
 * read it before the break may still be moving such a unit, and a
 * write in place beside it would be undone.
 */
static bool
in_place_locked (struct blkmap *map, uint64_t b, uint32_t units,
                 const struct blkmap_held *held) REQUIRES (map->state_lock)
{
  struct blkmap_held then;

  if (get_record_locked (map, b, &then))
    return (units & then.units & ~(held->where ^ then.where)) == 0;
  return !map->view_on;         /* not changed since the view: all kept */
}

bool
blkmap_holds (struct blkmap *map, uint64_t first, uint64_t last,
              uint64_t offset, uint64_t end, unsigned *place)
{
  uint64_t b = first, stop = last + 1;
  bool holds = true, places;
  int at = -1;

  blkmap_lock (map);
  places = map->places;
  while (holds && b < stop) {
    unsigned state;
    uint64_t run_end = statemap_run (&map->states, b, stop, &state);

    if (state == BLK_PARTIAL || (places && state == BLK_ALLOCATED)) {
      uint64_t from = blockgeom_start (&map->geom, b);
      uint64_t to = blockgeom_end (&map->geom, b);
      uint32_t need = blkmap_units_of (map, b, offset > from ? offset : from,
                                       end < to ? end : to);
      struct blkmap_held held;

      get_live_locked (map, b, &held);
      holds = (held.units & need) == need;
      if (holds && places) {
        uint32_t in1 = held.where & need;

        holds = (in1 == 0 || in1 == need) && (at == -1 || at == (in1 != 0)) &&
                in_place_locked (map, b, need, &held);
        at = in1 != 0;
      }
      run_end = b + 1;
    }
    else
      holds = state == BLK_ALLOCATED;
    b = run_end;
  }
  blkmap_unlock (map);
  *place = at == 1;
  return holds;
}

uint64_t
blkmap_space_held (struct blkmap *map, uint64_t first, uint64_t n)
{
  uint64_t b = first, stop = first + n, space = 0;

  blkmap_lock (map);
  while (b < stop) {
    unsigned state;
    uint64_t end = statemap_run (&map->states, b, stop, &state);

    if (state == BLK_ALLOCATED || state == BLK_PARTIAL)
      space += blkmap_space (map, b, end - b);
    b = end;
  }
  blkmap_unlock (map);
  return space;
}

void
blkmap_count (struct blkmap *map, uint64_t blocks,
              uint64_t counts[BLK_STATES])
{
  uint64_t b = 0;
  unsigned i;

  for (i = 0; i < BLK_STATES; ++i)
    counts[i] = 0;
  while (b < blocks) {
    unsigned runs;

    blkmap_lock (map);
    for (runs = 0; runs < COUNT_RUNS_PER_LOCK && b < blocks; ++runs) {
      unsigned state;
      uint64_t end = statemap_run (&map->states, b, blocks, &state);
      counts[state] += end - b;
      b = end;
    }
    blkmap_unlock (map);
  }
}
