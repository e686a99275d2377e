/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The kept overlay (cow-file=PATH): the one reader and writer of its
 * format, which the filter and nbdcow both build against.
 * docs/overlay-format.md is the specification and the argument for
 * crash safety; this library is its code:
 *
 *   format.c    the layout of a file and its header's bytes
 *   file.c      opening and locking a file, creating it, its flags,
 *               the crash-safe flush
 *   states.c    the state area: loading it, checked, and its pages
 *   slots.c     a packed file's slots in memory
 *   history.c   the checkpoints and marks of changed blocks (version 4)
 *   recovery.c  the data area where it holds no block: what a crash
 *               left, punched, cut or counted; emptying a file
 *
 * Nothing here knows nbdkit: a failing call returns -1 and leaves a
 * message naming the file in ko->why.  Not thread-safe: the filter
 * calls it at setup, at flush (one at a time) and at close, and
 * kept_export_page, which only reads, under its page_lock;
 * kept_slots_get and kept_data_run may run beside the others.
 */

#ifndef KEPT_H
#define KEPT_H

#include <stdbool.h>
#include <stdint.h>

#include "blockgeom.h"
#include "checkpoint.h"
#include "slotalloc.h"
#include "slotmap.h"
#include "statemap.h"

/*----------------------------------------------------------------------
 * The format.
 */

#define KEPT_HEADER_SIZE 8192
#define KEPT_NAME_MAX 4096      /* the longest NBD export name */
#define KEPT_STATE_PAGE 4096    /* the state area is written in pages */

/* The format version of new files; versions 1 to 8 are read and
 * written too.  Version 9 is version 8 that counts the times its
 * MARKS_STALE flag was set, and whose records of the log may clear the
 * flag of the count they name, so that a flush after a write in place
 * that set it syncs once.  Version 8 is version 7 whose records of the log carry
 * the mark of their blocks, so that a flush that raised marks of
 * blocks it records writes no page.  Version 7 is version 6 with a log
 * after the marks, in which a flush records the entries it changed in
 * the sync of their data (log.c).  Version 6 is version 5 with a block's entry twice as
 * long again, keeping a second slot of the block, its place 1, and
 * which of its units lie there (a point-in-time view keeps the others'
 * old bytes in place 0).  Version 5 is version 4 with a block's entry
 * of the state area twice as long, keeping which sub-blocks a block in
 * the overlay in part holds; version 4 is version 3 with the checkpoints
 * and the marks of changed blocks; version 3 packs the data (a slot
 * per block, its number in the block's entry of the state area),
 * versions 1 and 2 store block b at its own offset (2 bits of state
 * per block).
 */
#define KEPT_VERSION 9
#define KEPT_PACKED_VERSION 3   /* the first packed version */
#define KEPT_HISTORY_VERSION 4  /* the first with checkpoints and marks */
#define KEPT_PARTS_VERSION 5    /* the first with blocks held in part */
#define KEPT_PLACES_VERSION 6   /* the first with two places a block */
#define KEPT_LOG_VERSION 7      /* the first with a log of entries */
#define KEPT_LOG_MARKS_VERSION 8 /* the first whose records mark blocks */
#define KEPT_STALE_COUNT_VERSION 9 /* the first whose records clear
                                    * MARKS_STALE */

/* Version 5 keeps blocks in part, of block sizes from 16K on, in
 * sub-blocks of blockgeom_sub_shift: at most KEPT_PARTS of them.
 */
#define KEPT_PARTS 32
#define KEPT_PARTS_MIN_BLOCK (16 * 1024)

/* Flags of the header (version 2). */
#define KEPT_OPEN 1             /* a writer has it open: not closed cleanly */
#define KEPT_FLUSH_FAILED 2     /* with OPEN: the writer stopped after its
                                 * last flush failed */
#define KEPT_MARKS_STALE 4      /* version 4: changes may have been
                                 * written that the marks in the file
                                 * do not hold */
#define KEPT_FLAGS (KEPT_OPEN | KEPT_FLUSH_FAILED | KEPT_MARKS_STALE)

/* Version 9 keeps in bits 8-31 of the flags' field how many times
 * MARKS_STALE was set (the stale count), from 1 on, wrapping past
 * KEPT_STALE_COUNT_MAX to 1; 0 for never.
 */
#define KEPT_STALE_COUNT_SHIFT 8
#define KEPT_STALE_COUNT_MAX 0xffffffu

struct kept_layout {
  struct blockgeom geom;        /* the block size and the base's size */
  bool packed;                  /* version 3 on: slots; else block b at b */
  bool history;                 /* version 4 on: checkpoints and marks */
  unsigned entry_size;          /* packed: the bytes of a block's entry */
  unsigned part_shift;          /* version 5, blocks of 16K on: blocks
                                   may be held in part, in sub-blocks
                                   of 2^part_shift bytes; else 0 */
  bool places;                  /* version 6: a block's units may lie
                                   in a second slot (kept_units_all) */
  uint64_t blocks_per_page;     /* blocks whose states a page holds */
  uint64_t table_offset;        /* history: the two copies of the table */
  uint64_t states_offset;       /* the state area */
  uint64_t states_length;       /* a whole number of state pages */
  uint64_t marks_offset;        /* history: the marks, after the states */
  uint64_t marks_length;        /* history: whole pages, 4 bytes a block */
  uint64_t log_offset;          /* version 7: the log, after the marks */
  uint64_t log_length;          /* version 7: KEPT_LOG_SIZE, else 0 */
  uint64_t data_offset;         /* block 0, or slot 0 if packed */
};

/* History: the marks a marks page holds. */
#define KEPT_MARKS_PER_PAGE (KEPT_STATE_PAGE / 4)

/* The entries of a packed state area (little-endian uint32; in
 * version 5 followed by the uint32 of the sub-blocks held, 0 unless
 * the block is held in part; in version 6 then by the block's place-1
 * slot + 1, 0 for none, and the uint32 of its units there):
 */
#define KEPT_ENTRY_BASE 0       /* not allocated: reads the base */
#define KEPT_ENTRY_ZERO 1       /* reads as zeros */
#define KEPT_ENTRY_SLOT 2       /* and up: allocated, in slot entry - 2 */
#define KEPT_SLOTS_MAX (UINT64_C (0xffffffff) - KEPT_ENTRY_SLOT + 1)

/* What the filter tells a client of the plugin besides its data, kept
 * in the header of a file whose overlay holds every block, so that
 * after a restart it is served with no plugin: bytes 68 to 511, in the
 * header's first sector, which readers of this format that know
 * nothing of them ignore (docs/overlay-format.md).
 */
#define KEPT_DESCRIPTION_MAX 416
struct kept_answers {
  uint32_t minimum, preferred, maximum;         /* block sizes */
  int32_t can_cache;            /* NBDKIT_CACHE_* */
  int32_t is_rotational;        /* 0 or 1 */
};
struct kept_facts {
  bool known;                   /* false: the rest means nothing */
  struct kept_answers answers;
  bool has_description;
  char description[KEPT_DESCRIPTION_MAX + 1];   /* NUL terminated */
};

/* A decoded header.  Version 1 files have no flags and no count of
 * recoveries: both read as 0.
 */
struct kept_header {
  struct kept_layout layout;
  uint32_t version;             /* 1 to KEPT_VERSION */
  uint32_t flags;               /* KEPT_FLAGS */
  uint32_t stale_count;         /* version 9: MARKS_STALE set so often */
  uint32_t recoveries;          /* times opened after a crash */
  struct kept_facts facts;      /* version 2 on */
  char name[KEPT_NAME_MAX + 1]; /* the export, NUL terminated */
};

/* The layout of a file of this version, block size and base size. */
extern void kept_layout (uint32_t version, uint32_t block_size,
                         uint64_t base_size, struct kept_layout *layout);

/* The end of the file's metadata (header, table, states, marks, log):
 * the bytes before data_offset past it are a hole, taking no space.
 */
static inline uint64_t
kept_metadata_end (const struct kept_layout *layout)
{
  if (layout->log_length)
    return layout->log_offset + layout->log_length;
  return layout->history ? layout->marks_offset + layout->marks_length
                         : layout->states_offset + layout->states_length;
}

/* Fills buf (KEPT_HEADER_SIZE bytes) with header, as its version.  The
 * name is at most KEPT_NAME_MAX bytes.
 */
extern void kept_header_encode (const struct kept_header *header,
                                uint8_t *buf);

/* Why kept_header_decode refuses a header. */
enum kept_bad {
  KEPT_SOUND = 0,
  KEPT_FOREIGN,                 /* not an overlay, or a future version */
  KEPT_DAMAGED,                 /* an overlay whose header is damaged */
};

/* Checks buf (KEPT_HEADER_SIZE bytes) and fills header.  Returns
 * KEPT_SOUND, or what is wrong with *why saying it for a message.
 */
extern enum kept_bad kept_header_decode (const uint8_t *buf,
                                         struct kept_header *header,
                                         const char **why);

/*----------------------------------------------------------------------
 * A packed file's slots in memory (format version 3): which slot of
 * the data area holds each block, and which slots are taken.
 * kept_slots_get takes no lock (slotmap.h) and may run beside the
 * others, which the caller serializes.  A retired slot is not taken
 * again before the file is next opened: a read that looked the block
 * up before its retirement finds zeros there or the block's old data,
 * never another block's.
 */

struct kept_slots {
  struct slotmap map[2];        /* block b: its slot + 1 in place 0 and
                                   (version 6) in place 1, or 0 */
  struct slotalloc taken;       /* the slots of both places */
};

/* Empty slots for blocks blocks.  Returns 0, or -1 with errno set. */
extern int kept_slots_init (struct kept_slots *s, uint64_t blocks);
extern void kept_slots_free (struct kept_slots *s);

/* Sets *slot to block b's slot in place and returns true, or returns
 * false if b has none there.  The calls below take a place too: 0, or
 * in version 6 1.
 */
static inline bool
kept_slots_get (const struct kept_slots *s, uint64_t b, unsigned place,
                uint64_t *slot)
{
  uint32_t v = slotmap_get (&s->map[place], b);

  *slot = (uint64_t) v - 1;
  return v != 0;
}

/* Gives block b, which has none, slot (loading a file).  Returns 0, 1
 * if another block has slot already (b then has none), or -1 with
 * errno set.
 */
extern int kept_slots_assign (struct kept_slots *s, uint64_t b,
                              unsigned place, uint64_t slot);

/* Gives block b, which has none, the lowest free slot.  Returns 0, or
 * -1 with errno set: ENOSPC when no slot number is left, ENOMEM.
 */
extern int kept_slots_take (struct kept_slots *s, uint64_t b,
                            unsigned place, uint64_t *slot);

/* Block b has no slot any more; its slot stays taken. */
extern void kept_slots_retire (struct kept_slots *s, uint64_t b,
                               unsigned place);

/* One past the highest slot taken: the slots the data area spans. */
static inline uint64_t
kept_slots_end (const struct kept_slots *s)
{
  return slotalloc_end (&s->taken);
}

static inline bool
kept_slots_is_taken (const struct kept_slots *s, uint64_t slot)
{
  return slotalloc_is_taken (&s->taken, slot);
}

/*----------------------------------------------------------------------
 * The history of a file of version 4 (history.c): its table of
 * checkpoints, kept twice, and a mark per block, the epoch of its last
 * change while a checkpoint existed.
 */

#define KEPT_TABLE_SIZE 4096    /* one copy of the table */

struct kept_table {
  uint64_t sequence;            /* which write of the table it is */
  uint32_t last_epoch;          /* the newest epoch ever taken */
  unsigned count;
  struct checkpoint checkpoints[CHECKPOINTS_MAX];       /* oldest first */
};

/* Fills buf (KEPT_TABLE_SIZE bytes) with table. */
extern void kept_table_encode (const struct kept_table *table, uint8_t *buf);

/* Checks buf and fills table.  A copy of zeros (never written) is the
 * empty table of sequence 0.  Returns false if the copy is damaged
 * (torn by a crash as it was written).
 */
extern bool kept_table_decode (const uint8_t *buf, struct kept_table *table);

/* Where the write of the table of this sequence goes: the copy the
 * previous write did not use, so that a write torn by a crash leaves
 * the other whole.
 */
extern uint64_t kept_table_offset (const struct kept_layout *layout,
                                   uint64_t sequence);

/*----------------------------------------------------------------------
 * An opened kept overlay (file.c, states.c, history.c, recovery.c).
 */

/* The states of blocks, as the state area stores them. */
enum kept_state {
  KEPT_NOT_ALLOCATED = 0,       /* reads come from the base */
  KEPT_ALLOCATED = 1,           /* the data area holds the block */
  KEPT_ZERO = 2,                /* reads as zeros */
  KEPT_PARTIAL = 3,             /* version 5: its slot holds the
                                   sub-blocks kept_parts_get says, the
                                   others read from the base */
};

enum kept_mode {
  KEPT_READ,                    /* read only, shared lock */
  KEPT_WRITE,                   /* read-write, exclusive lock */
  KEPT_CREATE,                  /* as WRITE, creating a missing file */
};

/* Version 7: the log (log.c, docs/overlay-format.md).  A flush that
 * changed few entries writes them as one record after the last, in the
 * sync of the data they name, instead of writing their state pages
 * after a sync of their own; a flush that changed more, or the table
 * or marks, writes the pages, and then empties the log.
 */
#define KEPT_LOG_SIZE (128 * 1024)      /* the log's bytes in the file */
#define KEPT_LOG_ENTRIES 256            /* at most in a record */
#define KEPT_LOG_DATA (16 * 1024 * 1024) /* bytes a record checks, at most */

/* A block's entry as a record holds it: as the state page stores it
 * (kept_entry_of), with the units whose data the record checks (those
 * the entry names where the file's entries before did not) and the
 * CRC-32C of their bytes, in unit order.
 */
struct kept_log_entry {
  uint64_t b;
  uint32_t entry, parts, place1, where;
  uint32_t units, crc;
};

/* What the log holds: set by kept_load_states, moved on by
 * kept_log_write and kept_log_reset.
 */
struct kept_log {
  uint64_t lap;                 /* the sequence of the first record */
  uint64_t next_sequence;       /* of the next record */
  uint64_t next_at;             /* where it goes, from log_offset */
  uint64_t records;             /* in the log since its reset */
  bool failed;                  /* a record whose write or sync failed
                                   may lie at next_at, of sequence
                                   next_sequence: the log is to be
                                   emptied even with no record */
  uint64_t replayed;            /* records the load applied */
  uint64_t dropped;             /* blocks of a last record the load
                                   dropped: their data not durable */
  uint64_t lost_records;        /* whole records after the one that
                                   ends the log, which no crash leaves
                                   (damage to that one), */
  uint64_t lost;                /* and the blocks they name */
  uint32_t dropped_before;      /* blocks the last recovery dropped */
  uint64_t fresh_slots;         /* slots from here on lay past the end
                                   of the file as it opened (a writer's,
                                   kept_log_fresh) */
  uint64_t *blocks;             /* the blocks the load's records set, */
  uint64_t nr_blocks;           /* ascending, once each, */
  uint32_t *marks;              /* with the mark their last record gave
                                   them (version 8; 0 for none) */
};

/* The file, its header, and once its states are loaded (or it is
 * created), a packed file's slots.  The block states are the caller's:
 * the filter keeps them with its own lock.
 */
struct kept_overlay {
  int fd;
  char *path;
  bool has_header;              /* false: an empty file, not made yet */
  struct kept_header header;    /* if has_header */
  struct kept_slots slots;      /* packed, from kept_create or kept_load */
  struct slotmap parts;         /* part_shift: of each KEPT_PARTIAL
                                   block, the sub-blocks its slot holds,
                                   bit i for sub-block i; the caller's
                                   to change, as the states */
  struct slotmap where;         /* places: of each block in the
                                   overlay, its units in place 1, bit i
                                   for unit i (kept_units_all) */
  struct kept_log log;          /* version 7 */
  unsigned table_bad;           /* history: the copy (1 or 2) of the
                                   checkpoint table that kept_load_table
                                   found not whole, 0 for none: a
                                   writer writes it again before the
                                   file is closed cleanly */
  bool table_damaged;           /* it is damage: in a file closed
                                   cleanly no crash tore it, and the
                                   whole one may be older than the table
                                   was, so the marks may miss changes */
  bool damaged;                 /* the last failure was damage, not I/O */
  char why[1024];               /* the last failure: "PATH: what" */
};

/* The sub-blocks of block b: all of them, and those a KEPT_PARTIAL
 * block holds (meaningless for a block in another state).  Require
 * part_shift.
 */
static inline uint32_t
kept_parts_all (const struct kept_layout *layout, uint64_t b)
{
  uint64_t bytes = blockgeom_end (&layout->geom, b)
                   - blockgeom_start (&layout->geom, b);
  uint64_t n = (bytes + (UINT64_C (1) << layout->part_shift) - 1)
               >> layout->part_shift;

  return n >= 32 ? UINT32_MAX : (UINT32_C (1) << n) - 1;
}

static inline uint32_t
kept_parts_get (const struct kept_overlay *ko, uint64_t b)
{
  return slotmap_get (&ko->parts, b);
}

/* Makes room for block b to become KEPT_PARTIAL (kept_parts_set cannot
 * fail then): 0, or -1 with errno set.  Sets the sub-blocks block b
 * holds, read only while its state is KEPT_PARTIAL.
 */
static inline int
kept_parts_reserve (struct kept_overlay *ko, uint64_t b)
{
  return slotmap_reserve (&ko->parts, b, 1);
}

static inline void
kept_parts_set (struct kept_overlay *ko, uint64_t b, uint32_t parts)
{
  slotmap_set (&ko->parts, b, parts);
}

/* Version 6: a block's units are its sub-blocks where the file keeps
 * them (part_shift), else the whole block is its one unit.  All of
 * block b's, and those of the units of b in place 1 (0 for a block
 * not in the overlay).  where requires places.
 */
static inline uint32_t
kept_units_all (const struct kept_layout *layout, uint64_t b)
{
  return layout->part_shift ? kept_parts_all (layout, b) : 1;
}

static inline unsigned
kept_unit_shift (const struct kept_layout *layout)
{
  return layout->part_shift ? layout->part_shift : layout->geom.shift;
}

static inline uint32_t
kept_where_get (const struct kept_overlay *ko, uint64_t b)
{
  return ko->header.layout.places ? slotmap_get (&ko->where, b) : 0;
}

/* Version 6: the end of the run of blocks of [b, end) from b on that
 * have no unit in place 1, or b + 1 if b has some: readers take such a
 * block on its own, its units lying in two slots.
 */
static inline uint64_t
kept_places_cut (const struct kept_overlay *ko, uint64_t b, uint64_t end)
{
  if (!ko->header.layout.places)
    return end;
  if (kept_where_get (ko, b) != 0)
    return b + 1;
  while (++b < end && kept_where_get (ko, b) == 0)
    ;
  return b;
}

/* Opens and locks path (a shared lock to read, an exclusive one to
 * write: the filter writes, so a file it serves cannot be opened) and
 * reads its header if it is not empty.  A file that is not an overlay
 * or whose header is damaged is refused.  Returns 0, or -1 with
 * ko->why set; ko needs no kept_close then.
 */
extern int kept_open (struct kept_overlay *ko, const char *path,
                      enum kept_mode mode);

/* Records facts in the header, durably (its first sector, synced),
 * for a file of version 2 on.  Returns 0, or -1 with ko->why set.
 */
extern int kept_set_facts (struct kept_overlay *ko,
                           const struct kept_facts *facts);

/* Closes the file, dropping the lock, and frees the slots. */
extern void kept_close (struct kept_overlay *ko);

/* Lays out an empty file of version KEPT_VERSION for a base of
 * base_size bytes, export name, and makes it durable with its header
 * flagged KEPT_OPEN: sized first, so a header on disk always comes
 * with its whole state area (and, unpacked, data area) behind it.
 * The slots start empty.
 */
extern int kept_create (struct kept_overlay *ko, uint32_t block_size,
                        uint64_t base_size, const char *name);

/* Number of blocks of the base. */
extern uint64_t kept_blocks (const struct kept_overlay *ko);

/* The shortest the file can be: its header and state area, and,
 * unpacked, the whole data area.
 */
extern uint64_t kept_min_length (const struct kept_overlay *ko);

/* Checks that the file is as long as kept_min_length (damage if
 * not).
 */
extern int kept_check_length (struct kept_overlay *ko);

/* The blocks whose states cannot be, by kind. */
struct kept_damage {
  uint64_t invalid;             /* unpacked: the value 3 */
  uint64_t bad_parts;           /* version 5: sub-blocks held where
                                   none can be */
  uint64_t shared;              /* packed: a slot another block has too */
  uint64_t past_end;            /* packed: a slot past the end of the file */
  uint64_t bad_places;          /* version 6: units in place 1 that the
                                   block does not hold or with no slot
                                   of its own there */
};

/* Loads the block states into states (empty before), and if the file
 * is packed the blocks' slots into ko->slots, and the sub-blocks of the
 * blocks held in part into ko->parts.  Refuses a state that cannot be
 * (struct kept_damage; the first such block is named).  With damage
 * non-NULL, it is counted there instead and the load goes on, the bad
 * blocks loaded as state 3 (unpacked) or not allocated (packed), with
 * no slot.
 */
extern int kept_load_states (struct kept_overlay *ko, struct statemap *states,
                             struct kept_damage *damage);

/* The bytes of state page page (KEPT_STATE_PAGE of them) as the file
 * stores them, from states and, packed, the slots and the parts, into
 * buf.
 */
extern void kept_export_page (const struct kept_overlay *ko,
                              const struct statemap *states,
                              uint64_t page, uint8_t *buf);

/* Version 4: loads the newer of the table's two whole copies into
 * table; damage if neither is whole.  One copy not whole sets
 * ko->table_bad, and in a file closed cleanly is damage too, not a
 * write a crash tore: it sets ko->table_damaged, and the load goes on
 * with the other.
 */
extern int kept_load_table (struct kept_overlay *ko, struct kept_table *table);

/* Version 4: calls found for each block with a mark (not 0), in order,
 * and sets *max_mark to the highest.  After kept_load_states: from
 * version 8 on a block's mark is the higher of its page's and the one
 * the log's records gave it.  found returns 0, or -1 to stop
 * the load, which then fails.
 */
typedef int kept_found_mark (void *opaque, uint64_t b, uint32_t mark);
extern int kept_load_marks (struct kept_overlay *ko, kept_found_mark *found,
                            void *opaque, uint32_t *max_mark);

/* Version 4: the bytes of marks page page (KEPT_STATE_PAGE of them:
 * the marks of blocks [page, page + 1) x KEPT_MARKS_PER_PAGE) as the
 * file stores them, from marks (the mark of block b at entry b), into
 * buf.
 */
extern void kept_export_marks_page (const struct kept_overlay *ko,
                                    const struct slotmap *marks,
                                    uint64_t page, uint8_t *buf);

/* Whether the marks of a file whose table holds checkpoints
 * checkpoints may miss a change it holds (MARKS_STALE, or a copy of
 * its table damaged): then every block of its overlay counts as
 * changed since each checkpoint.
 */
static inline bool
kept_marks_stale (const struct kept_overlay *ko, unsigned checkpoints)
{
  /* The load clears the flag of the header it read if a record of
   * the log cleared it (kept_log_read).
   */
  return checkpoints > 0 &&
         ((ko->header.flags & KEPT_MARKS_STALE) != 0 || ko->table_damaged);
}

/* Version 4: writes table (as kept_load_table loaded it, its sequence
 * advanced to the bad copy's turn) over the copy kept_load_table found
 * not whole, durably, after marking the file MARKS_STALE if that was
 * damage: nbdcow check --repair.  Returns 0, or -1 with ko->why set.
 */
extern int kept_mend_table (struct kept_overlay *ko,
                            struct kept_table *table);

/* Version 4: empties the table and clears the marks, durably. */
extern int kept_clear_history (struct kept_overlay *ko);

/* Punches the data area where it holds no block of the overlay
 * (unpacked: every block that states does not hold allocated; packed:
 * every slot not taken, the file cut after the last one taken as
 * kept_cut cuts it, and in
 * version 6 the units of a block with a place-1 slot in the place they
 * do not lie in): what a crash left there of unflushed writes, or only
 * a view kept, is not part of the disk.  And the pages of the metadata
 * that hold only zeros, which a view allocated ahead.  A
 * filesystem that cannot punch holes only costs space.
 */
extern void kept_punch_unallocated (struct kept_overlay *ko,
                                    const struct statemap *states);

/* Packed: cuts the file after its last slot taken, past which the
 * filter extends it ahead of its writes, if the log holds no record
 * (else it does nothing: the state pages may name a slot past that
 * until the log is folded into them).  Unpacked: does nothing.
 */
extern void kept_cut (struct kept_overlay *ko);

/* Sets *bytes to the disk space the data area takes where it holds no
 * block of the overlay, and the metadata takes in pages that hold only
 * zeros: left by writes a crash cut off before their flush, or by a
 * view a crash ended, harmless, given back by kept_punch_unallocated.
 */
extern int kept_leaked_bytes (struct kept_overlay *ko,
                              const struct statemap *states, uint64_t *bytes);

/* Where the data of allocated blocks [b, b+n) is in place: sets *at to
 * the file offset of block b's and returns how many of the blocks from
 * b on lie one after another there (at least 1, or 0 if b has no slot
 * there).  A block's unit lies at the same offset in each of its slots;
 * kept_where_get says which holds it.  The one definition of a kept
 * file's addressing, inline for the filter's requests; a packed file's
 * slots are looked up without a lock.
 */
static inline uint64_t
kept_data_run (const struct kept_overlay *ko, uint64_t b, uint64_t n,
               unsigned place, uint64_t *at)
{
  const struct kept_layout *l = &ko->header.layout;
  uint64_t slot, next, i;

  if (!l->packed) {
    *at = l->data_offset + blockgeom_start (&l->geom, b);
    return n;
  }
  if (!kept_slots_get (&ko->slots, b, place, &slot))
    return 0;
  *at = l->data_offset + blockgeom_start (&l->geom, slot);
  for (i = 1; i < n; ++i)
    if (!kept_slots_get (&ko->slots, b + i, place, &next) ||
        next != slot + i)
      break;
  return i;
}

/* Sets the flags and the count of recoveries, and makes the header
 * durable.  Only its first 512 bytes change, so a power loss in the
 * middle leaves the old or the new header (one sector is written
 * whole).  A version 1 file becomes version 2 here; the others keep
 * their version.
 */
extern int kept_set_flags (struct kept_overlay *ko, uint32_t flags,
                           uint32_t recoveries);

/* A flush (docs/overlay-format.md): rounds of take, sync the data,
 * write the pages taken, sync.  take copies up to max dirty pages of
 * metadata (state pages, as kept_export_page makes them, and of
 * version 4 marks pages and the table), KEPT_STATE_PAGE bytes each,
 * from its position *next on into buf, their file offsets into at,
 * marks them clean, advances *next and returns how many; redirty marks
 * them dirty again after a failed round.  The caller takes whatever
 * lock protects the states inside those two.  On failure errno is set
 * too.
 */
typedef unsigned kept_take_pages (void *opaque, uint64_t *next,
                                  uint64_t *at, uint8_t *buf,
                                  unsigned max);
typedef void kept_redirty_pages (void *opaque, const uint64_t *at,
                                 unsigned n);
extern int kept_flush (struct kept_overlay *ko, kept_take_pages *take,
                       kept_redirty_pages *redirty, void *opaque);

/* Makes the overlay empty: every state not allocated (version 4: and
 * no checkpoint or mark), durable, then the data area punched (packed:
 * cut off).  A crash in between leaves
 * blocks in the overlay or not, each reading what it read before.
 */
extern int kept_empty (struct kept_overlay *ko);

/*----------------------------------------------------------------------
 * Version 7: the log (log.c).
 */

/* Block b's entry as the state page stores it, from states and the
 * slots, parts and places in memory (units and crc 0).
 */
extern void kept_entry_of (const struct kept_overlay *ko,
                           const struct statemap *states, uint64_t b,
                           struct kept_log_entry *e);

/* The units of block b that entry e names where old does not (in
 * another slot, or not at all): the units a record of e checks.
 */
extern uint32_t kept_new_units (const struct kept_overlay *ko,
                                const struct kept_log_entry *old,
                                const struct kept_log_entry *e);

/* Sets e->crc to the CRC-32C of the bytes of e->units in the file, each
 * read from the place e says; a unit of zeros in a slot from
 * ko->log.fresh_slots on leaves e->units instead, reading as zeros
 * whether its write reached the disk or not.  Returns 0, or -1 with
 * ko->why set.
 */
extern int kept_log_sum (struct kept_overlay *ko, struct kept_log_entry *e);

/* A writer, once the file is cut after its last slot (kept_cut): the
 * slots past its end are fresh.  Returns 0, or -1 with ko->why set.
 */
extern int kept_log_fresh (struct kept_overlay *ko);

/* Whether a record of n entries fits in the log after its last. */
extern bool kept_log_room (const struct kept_overlay *ko, unsigned n);

/* Writes a record of the n entries (kept_log_room; 0 for one that only
 * says the record before it was made durable) after the last, then
 * fdatasync: the one sync of a flush.  From version 8 on the record
 * gives its blocks mark (0: none), which loading the marks raises
 * them to; from version 9 on it clears MARKS_STALE if the header's
 * stale count is still clears (0: it clears nothing).  Returns 0, or
 * -1 with ko->why set: the next write goes where this one did.
 */
extern int kept_log_write (struct kept_overlay *ko,
                           const struct kept_log_entry *entries, unsigned n,
                           uint32_t mark, uint32_t clears);

/* What a load found lost after the log's end (log->lost_records,
 * log->lost), in words for the user: "the log ends at a damaged
 * record, and N whole records after it, the flushes of M blocks, are
 * lost with it".
 */
#define KEPT_LOG_LOST_WORDS 160
extern void kept_log_lost_words (const struct kept_log *log,
                                 char words[KEPT_LOG_LOST_WORDS]);

/* Empties the log, durably, once the state pages hold every entry of
 * its records (they are durable), noting dropped (the blocks a
 * recovery dropped) for nbdcow.  Returns 0, or -1 with ko->why set.
 */
extern int kept_log_reset (struct kept_overlay *ko, uint32_t dropped);

#endif /* KEPT_H */
