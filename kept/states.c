/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A kept overlay's state area: the block states (and a packed file's
 * slots) loaded from it and checked, and its pages as a flush writes
 * them (kept.h).
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "iszero.h"

/* Block states of value 3 in the packed bytes buf[0..len), which no
 * state has.  Sets *first to the block of the first, counted from the
 * block of buf[0].
 */
static uint64_t
count_bad_states (const uint8_t *buf, uint64_t len, uint64_t *first)
{
  uint64_t i, bad = 0;

  for (i = 0; i < len; ++i) {
    unsigned both = buf[i] & (buf[i] >> 1) & 0x55;
    if (both == 0)
      continue;
    if (bad == 0)
      *first = 4 * i + __builtin_ctz (both) / 2;
    bad += __builtin_popcount (both);
  }
  return bad;
}

/* A chunk of an unpacked state area, len bytes from byte at of it. */
static int
load_unpacked (struct kept_overlay *ko, const uint8_t *buf, uint64_t at,
               uint64_t len, struct statemap *states,
               struct kept_damage *damage)
{
  uint64_t first_bad = 0, bad = count_bad_states (buf, len, &first_bad);

  if (bad && damage == NULL)
    return kept_fail (ko, true, "corrupted block states (block %" PRIu64
                 " has the invalid state 3)", 4 * at + first_bad);
  if (damage)
    damage->invalid += bad;
  if (!is_zero ((const char *) buf, len) &&
      statemap_import (states, 4 * at, 4 * len, buf) == -1)
    return kept_fail (ko, false, "cannot load the block states: %m");
  return 0;
}

/* Gives allocated block b of a packed file its slot in place, checking
 * that the slot is the block's alone and lies within the file.
 * Returns 0; 1 if the entry is bad and damage is not NULL, which
 * counts it; or -1 after kept_fail, for a bad entry without damage or
 * want of memory.
 */
static int
load_slot (struct kept_overlay *ko, struct kept_slots *slots, uint64_t b,
           unsigned place, uint64_t slot, uint64_t file_length,
           struct kept_damage *damage)
{
  const struct kept_layout *l = &ko->header.layout;
  uint64_t end = kept_slot_end (l, b, slot);
  int r;

  if (end > file_length) {
    if (damage) {
      ++damage->past_end;
      return 1;
    }
    return kept_fail (ko, true, "corrupted block states or truncated file "
                 "(block %" PRIu64 " is in slot %" PRIu64 ", past the end "
                 "of the file)", b, slot);
  }
  r = kept_slots_assign (slots, b, place, slot);
  if (r == -1)
    return kept_fail (ko, false, "cannot load the block slots: %m");
  if (r == 1 && damage) {
    ++damage->shared;
    return 1;
  }
  if (r == 1)
    return kept_fail (ko, true, "corrupted block states (block %" PRIu64
                 " is in slot %" PRIu64 "%s, which another block has%s)",
                 b, slot, place ? " in place 1" : "",
                 place ? ", or it in place 0" : "");
  return r;
}

/* The sub-blocks parts that the entry of block b names, a block in the
 * overlay in *state (a file of version 5, where parts may be 0): sets
 * *state to the state they make it, KEPT_PARTIAL for some of them, as
 * it was for none or all.  Returns 0; 1 if the block cannot hold them
 * (it is not in a slot, or has no such sub-blocks); or -1 with errno
 * set.
 */
static int
load_parts (struct kept_overlay *ko, uint64_t b, unsigned *state,
            uint32_t parts)
{
  const struct kept_layout *l = &ko->header.layout;
  uint32_t all;

  if (parts == 0)
    return 0;
  if (*state != KEPT_ALLOCATED || l->part_shift == 0)
    return 1;
  all = kept_parts_all (l, b);
  if ((parts & ~all) != 0)
    return 1;
  if (parts == all)
    return 0;
  if (kept_parts_reserve (ko, b) == -1)
    return -1;
  kept_parts_set (ko, b, parts);
  *state = KEPT_PARTIAL;
  return 0;
}

/* The units of place 1 that the entry of block b names, in a slot
 * place1 - 1 (version 6; place1 0: none), the block holding held:
 * returns 0 after keeping them; 1 if they cannot be (units the block
 * does not hold, units without a slot or a slot without units, a slot
 * that is the block's place-0 slot or no slot at all); or -1 with
 * errno set.
 */
static int
load_where (struct kept_overlay *ko, const struct kept_log_entry *e, uint32_t held)
{
  if (e->place1 == 0 && e->where == 0)
    return 0;
  if (e->place1 == 0 || e->where == 0 || (e->where & ~held) != 0 ||
      e->place1 - 1 >= KEPT_SLOTS_MAX ||
      e->place1 - 1 == e->entry - KEPT_ENTRY_SLOT)
    return 1;
  if (slotmap_reserve (&ko->where, e->b, 1) == -1)
    return -1;
  slotmap_set (&ko->where, e->b, e->where);
  return 0;
}

/* Block b, whose entry was bad, holds nothing in part or in place 1. */
static void
forget_entry (struct kept_overlay *ko, uint64_t b)
{
  const struct kept_layout *l = &ko->header.layout;

  if (l->part_shift)
    kept_parts_set (ko, b, 0);
  if (l->places)
    slotmap_set (&ko->where, b, 0);
}

/* Checks and keeps entry e, setting *state: returns 0; 1 if it is bad
 * and damage is not NULL, which counts it (the block then is not in
 * the overlay); or -1 after kept_fail.
 */
static int
load_entry (struct kept_overlay *ko, const struct kept_log_entry *e, unsigned *state,
            uint64_t file_length, struct kept_slots *slots,
            struct kept_damage *damage)
{
  const struct kept_layout *l = &ko->header.layout;
  bool in_slot = e->entry >= KEPT_ENTRY_SLOT;
  int bad, r;

  *state = in_slot ? KEPT_ALLOCATED : KEPT_ZERO;
  bad = e->entry == KEPT_ENTRY_BASE ? e->parts != 0
                                    : load_parts (ko, e->b, state, e->parts);
  if (bad == -1)
    return kept_fail (ko, false, "cannot load the block states: %m");
  if (bad && damage == NULL)
    return kept_fail (ko, true, "corrupted block states (block %" PRIu64
                      " holds sub-blocks %#" PRIx32 ", which it cannot)",
                      e->b, e->parts);
  if (bad) {
    ++damage->bad_parts;
    return 1;
  }
  bad = !in_slot && (e->place1 || e->where)
        ? 1 : load_where (ko, e, *state == KEPT_PARTIAL
                                 ? e->parts : kept_units_all (l, e->b));
  if (bad == -1)
    return kept_fail (ko, false, "cannot load the block states: %m");
  if (bad && damage == NULL)
    return kept_fail (ko, true, "corrupted block states (block %" PRIu64
                      " has units %#" PRIx32 " in place 1, which it "
                      "cannot)", e->b, e->where);
  if (bad) {
    ++damage->bad_places;
    forget_entry (ko, e->b);
    return 1;
  }
  if (!in_slot)
    return 0;
  r = load_slot (ko, slots, e->b, 0, e->entry - KEPT_ENTRY_SLOT,
                 file_length, damage);
  if (r == 0 && e->place1)
    r = load_slot (ko, slots, e->b, 1, e->place1 - 1, file_length, damage);
  if (r == 1) {
    forget_entry (ko, e->b);
    kept_slots_retire (slots, e->b, 0);
  }
  return r;
}

int
kept_load_logged (struct kept_overlay *ko, struct statemap *states,
                  const struct kept_log_entry *e, uint64_t file_length,
                  struct kept_damage *damage)
{
  unsigned state;
  int r;

  if (e->entry == KEPT_ENTRY_BASE && e->parts == 0 && e->place1 == 0 &&
      e->where == 0)
    return 0;
  r = load_entry (ko, e, &state, file_length, &ko->slots, damage);
  if (r != 0)
    return r;
  if (statemap_reserve (states, e->b, 1) == -1)
    return kept_fail (ko, false, "cannot load the block states: %m");
  statemap_set (states, e->b, 1, state);
  return 0;
}

/* What kept_load_states passes to load_chunk: the blocks the log sets
 * (ko->log.blocks), ascending, from next_logged on not yet passed.
 */
struct load {
  struct statemap *states;
  struct kept_damage *damage;
  uint64_t file_length;
  uint64_t next_logged;
};

/* Whether the log sets block b, of blocks met in ascending order. */
static bool
logged (const struct kept_overlay *ko, struct load *load, uint64_t b)
{
  const struct kept_log *log = &ko->log;

  while (load->next_logged < log->nr_blocks &&
         log->blocks[load->next_logged] < b)
    load->next_logged++;
  return load->next_logged < log->nr_blocks &&
         log->blocks[load->next_logged] == b;
}

/* A chunk of a packed state area: entries of blocks [first, first +
 * n).  A bad entry is counted in damage and its block left not
 * allocated, or fails the load if damage is NULL.  A block the log
 * sets is left to it: its entry here may name a slot a crash cut off
 * before the log was folded.
 */
static int
load_packed (struct kept_overlay *ko, const uint8_t *buf, uint64_t first,
             uint64_t n, struct load *load)
{
  unsigned size = ko->header.layout.entry_size;
  uint64_t i;

  for (i = 0; i < n; ++i) {
    const uint8_t *p = buf + size * i;
    struct kept_log_entry e = {
      .b = first + i,
      .entry = kept_get_le (p, 4),
      .parts = size >= 8 ? kept_get_le (p + 4, 4) : 0,
      .place1 = size == 16 ? kept_get_le (p + 8, 4) : 0,
      .where = size == 16 ? kept_get_le (p + 12, 4) : 0,
    };
    unsigned state;
    int r;

    if (e.entry == KEPT_ENTRY_BASE && e.parts == 0 && e.place1 == 0 &&
        e.where == 0)
      continue;
    if (logged (ko, load, e.b))
      continue;
    r = load_entry (ko, &e, &state, load->file_length, &ko->slots,
                    load->damage);
    if (r == -1)
      return -1;
    if (r == 1)
      continue;
    if (statemap_reserve (load->states, e.b, 1) == -1)
      return kept_fail (ko, false, "cannot load the block states: %m");
    statemap_set (load->states, e.b, 1, state);
  }
  return 0;
}

/* A chunk of the state area, len bytes from byte at of it. */
static int
load_chunk (struct kept_overlay *ko, const uint8_t *buf, uint64_t at,
            uint64_t len, void *opaque)
{
  struct load *load = opaque;
  unsigned size = ko->header.layout.entry_size;
  uint64_t blocks = kept_blocks (ko), first, n;

  if (!ko->header.layout.packed)
    return load_unpacked (ko, buf, at, len, load->states, load->damage);
  first = at / size;
  n = len / size;
  if (first >= blocks)
    return 0;
  return load_packed (ko, buf, first, first + n > blocks ? blocks - first : n,
                      load);
}

int
kept_load_states (struct kept_overlay *ko, struct statemap *states,
                  struct kept_damage *damage)
{
  const struct kept_layout *l = &ko->header.layout;
  struct load load = { .states = states, .damage = damage };
  struct kept_log_entry *last = NULL;
  struct stat st;
  int r;

  if (damage)
    *damage = (struct kept_damage) { 0 };
  if (fstat (ko->fd, &st) == -1)
    return kept_fail (ko, false, "fstat: %m");
  load.file_length = st.st_size;
  if (l->packed && kept_slots_init (&ko->slots, kept_blocks (ko)) == -1)
    return kept_fail (ko, false, "cannot load the block slots: %m");
  if ((l->part_shift && slotmap_init (&ko->parts, kept_blocks (ko)) == -1) ||
      (l->places && slotmap_init (&ko->where, kept_blocks (ko)) == -1))
    return kept_fail (ko, false, "cannot load the block states: %m");
  /* The log first: the pages' entries of the blocks it sets are not
   * loaded.
   */
  r = l->log_length ? kept_log_read (ko, load.file_length, &last) : 0;
  if (r == 0)
    r = kept_read_area (ko, l->states_offset, l->states_length,
                        "block states", load_chunk, &load);
  if (r == 0 && l->log_length)
    r = kept_log_apply (ko, states, last, load.file_length, damage);
  free (last);
  return r;
}

void
kept_entry_of (const struct kept_overlay *ko, const struct statemap *states,
               uint64_t b, struct kept_log_entry *e)
{
  const struct kept_slots *slots = &ko->slots;
  uint64_t slot;

  *e = (struct kept_log_entry) { .b = b, .entry = KEPT_ENTRY_BASE };
  switch (statemap_get (states, b)) {
  case KEPT_ZERO:
    e->entry = KEPT_ENTRY_ZERO;
    break;
  case KEPT_PARTIAL:
    e->parts = kept_parts_get (ko, b);
    /* fall through */
  case KEPT_ALLOCATED:
    /* A block in the overlay, whole or in part, always has its slot. */
    if (kept_slots_get (slots, b, 0, &slot))
      e->entry = slot + KEPT_ENTRY_SLOT;
    /* The place-1 slot is named only with units in it. */
    e->where = kept_where_get (ko, b);
    if (e->where != 0 && kept_slots_get (slots, b, 1, &slot))
      e->place1 = slot + 1;
    break;
  }
  if (e->entry == KEPT_ENTRY_BASE)
    e->parts = 0;
  if (e->entry < KEPT_ENTRY_SLOT || e->place1 == 0)
    e->where = e->place1 = 0;
}

void
kept_export_page (const struct kept_overlay *ko, const struct statemap *states,
                  uint64_t page, uint8_t *buf)
{
  const struct kept_layout *l = &ko->header.layout;
  uint64_t first = page * l->blocks_per_page, i;

  if (!l->packed) {
    statemap_export (states, first, l->blocks_per_page, buf);
    return;
  }
  for (i = 0; i < l->blocks_per_page; ++i) {
    uint8_t *p = buf + l->entry_size * i;
    struct kept_log_entry e;

    kept_entry_of (ko, states, first + i, &e);
    kept_put_le (p, e.entry, 4);
    if (l->entry_size >= 8)
      kept_put_le (p + 4, e.parts, 4);
    if (l->entry_size == 16) {
      kept_put_le (p + 8, e.place1, 4);
      kept_put_le (p + 12, e.where, 4);
    }
  }
}
