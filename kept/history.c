/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The history of a kept overlay of format version 4: its table of
 * checkpoints, written in turn to two copies so that a crash in the
 * middle of one write leaves the other whole, and the marks of changed
 * blocks, a little-endian uint32 per block (kept.h,
 * docs/overlay-format.md).
 */

#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fullio.h"
#include "internal.h"
#include "iszero.h"

static const char table_magic[8] = { 'n', 'b', 'd', 'k', 'C', 'K', 'P', 'T' };

enum {
  OFF_MAGIC = 0,
  OFF_SEQUENCE = 8,
  OFF_CRC = 16,
  OFF_COUNT = 20,
  OFF_LAST_EPOCH = 24,
  OFF_ENTRIES = 32,
  /* epoch (4), name length (1), flags (1), 2 zero, name */
  ENTRY_SIZE = 72,
  ENTRY_FLAGS = 5,
  ENTRY_NAME = 8,
  FLAG_VIEW = 1,                /* struct checkpoint's view */
  OFF_IDS = 2560,               /* the checkpoints' ids, 8 bytes each */
};

_Static_assert (OFF_ENTRIES + CHECKPOINTS_MAX * ENTRY_SIZE <= OFF_IDS,
                "the entries end before the ids");
_Static_assert (OFF_IDS + CHECKPOINTS_MAX * 8 <= KEPT_TABLE_SIZE,
                "the table fits its copy");
_Static_assert (ENTRY_NAME + CHECKPOINT_NAME_MAX <= ENTRY_SIZE,
                "a name fits its entry");

static uint32_t
table_crc (const uint8_t *buf)
{
  return kept_crc_without (buf, KEPT_TABLE_SIZE, OFF_CRC);
}

void
kept_table_encode (const struct kept_table *table, uint8_t *buf)
{
  unsigned i;

  memset (buf, 0, KEPT_TABLE_SIZE);
  memcpy (buf + OFF_MAGIC, table_magic, sizeof table_magic);
  kept_put_le (buf + OFF_SEQUENCE, table->sequence, 8);
  kept_put_le (buf + OFF_COUNT, table->count, 4);
  kept_put_le (buf + OFF_LAST_EPOCH, table->last_epoch, 4);
  for (i = 0; i < table->count; ++i) {
    const struct checkpoint *c = &table->checkpoints[i];
    uint8_t *e = buf + OFF_ENTRIES + i * ENTRY_SIZE;
    size_t len = strlen (c->name);

    kept_put_le (e, c->epoch, 4);
    e[4] = len;
    e[ENTRY_FLAGS] = c->view ? FLAG_VIEW : 0;
    memcpy (e + ENTRY_NAME, c->name, len);
    kept_put_le (buf + OFF_IDS + 8 * i, c->id, 8);
  }
  kept_put_le (buf + OFF_CRC, table_crc (buf), 4);
}

/* Entry i of a table whose checksum held: a valid name, and epochs
 * rising, none past the last.
 */
static bool
decode_entry (const uint8_t *buf, unsigned i, struct kept_table *table)
{
  const uint8_t *e = buf + OFF_ENTRIES + i * ENTRY_SIZE;
  struct checkpoint *c = &table->checkpoints[i];
  unsigned len = e[4];

  if (len > CHECKPOINT_NAME_MAX)
    return false;
  memcpy (c->name, e + ENTRY_NAME, len);
  c->name[len] = '\0';
  c->epoch = kept_get_le (e, 4);
  c->view = e[ENTRY_FLAGS] & FLAG_VIEW;
  c->id = kept_get_le (buf + OFF_IDS + 8 * i, 8);
  return checkpoint_name_valid (c->name) && c->epoch != 0 &&
         c->epoch <= table->last_epoch &&
         (i == 0 || c->epoch > table->checkpoints[i - 1].epoch);
}

bool
kept_table_decode (const uint8_t *buf, struct kept_table *table)
{
  unsigned i;

  memset (table, 0, sizeof *table);
  if (is_zero ((const char *) buf, KEPT_TABLE_SIZE))
    return true;
  if (memcmp (buf + OFF_MAGIC, table_magic, sizeof table_magic) != 0 ||
      kept_get_le (buf + OFF_CRC, 4) != table_crc (buf))
    return false;
  table->sequence = kept_get_le (buf + OFF_SEQUENCE, 8);
  table->count = kept_get_le (buf + OFF_COUNT, 4);
  table->last_epoch = kept_get_le (buf + OFF_LAST_EPOCH, 4);
  if (table->count > CHECKPOINTS_MAX)
    return false;
  for (i = 0; i < table->count; ++i)
    if (!decode_entry (buf, i, table))
      return false;
  return true;
}

uint64_t
kept_table_offset (const struct kept_layout *layout, uint64_t sequence)
{
  return layout->table_offset + (sequence % 2) * KEPT_TABLE_SIZE;
}

int
kept_load_table (struct kept_overlay *ko, struct kept_table *table)
{
  const struct kept_layout *l = &ko->header.layout;
  uint8_t *buf = malloc (2 * KEPT_TABLE_SIZE);
  struct kept_table other;
  bool whole[2];
  int r = 0;

  if (buf == NULL)
    return kept_fail (ko, false, "malloc: %m");
  if (pread_full (ko->fd, buf, 2 * KEPT_TABLE_SIZE, l->table_offset) == -1)
    r = kept_fail (ko, false, "cannot read the checkpoints: %m");
  else {
    whole[0] = kept_table_decode (buf, table);
    whole[1] = kept_table_decode (buf + KEPT_TABLE_SIZE, &other);
    if (!whole[0] && !whole[1])
      r = kept_fail (ko, true, "corrupted checkpoint table (both copies)");
    else if (!whole[0] || (whole[1] && other.sequence > table->sequence))
      *table = other;
    ko->table_bad = r == 0 && whole[0] != whole[1] ? (whole[0] ? 2 : 1) : 0;
    /* A writer writes a copy only while the file is marked open. */
    ko->table_damaged = ko->table_bad && !(ko->header.flags & KEPT_OPEN);
  }
  free (buf);
  return r;
}

int
kept_mend_table (struct kept_overlay *ko, struct kept_table *table)
{
  const struct kept_layout *l = &ko->header.layout;
  uint8_t *buf = malloc (KEPT_TABLE_SIZE);
  int r = 0;

  if (buf == NULL)
    return kept_fail (ko, false, "malloc: %m");
  /* The next sequence whose copy is the damaged one. */
  table->sequence++;
  if (kept_table_offset (l, table->sequence) !=
      l->table_offset + (ko->table_bad - 1) * KEPT_TABLE_SIZE)
    table->sequence++;
  kept_table_encode (table, buf);
  if (ko->table_damaged &&
      kept_set_flags (ko, ko->header.flags | KEPT_MARKS_STALE,
                      ko->header.recoveries) == -1)
    r = -1;
  else if (pwrite_full (ko->fd, buf, KEPT_TABLE_SIZE,
                        kept_table_offset (l, table->sequence)) == -1 ||
           fdatasync (ko->fd) == -1)
    r = kept_fail (ko, false, "cannot write the checkpoints: %m");
  else
    ko->table_bad = 0;
  free (buf);
  return r;
}

void
kept_export_marks_page (const struct kept_overlay *ko,
                        const struct slotmap *marks, uint64_t page,
                        uint8_t *buf)
{
  uint64_t first = page * KEPT_MARKS_PER_PAGE, blocks = kept_blocks (ko), i;

  for (i = 0; i < KEPT_MARKS_PER_PAGE; ++i)
    kept_put_le (buf + 4 * i,
                 first + i < blocks ? slotmap_get (marks, first + i) : 0, 4);
}

/* What kept_load_marks passes to load_chunk: with next, the first
 * block of the log's (ko->log.blocks, version 8) not yet passed.
 */
struct load {
  kept_found_mark *found;
  void *opaque;
  uint32_t *max_mark;
  uint64_t next;
};

/* Passes block b's mark, unless 0. */
static int
pass_mark (struct kept_overlay *ko, struct load *load, uint64_t b,
           uint32_t mark)
{
  if (mark == 0)
    return 0;
  if (mark > *load->max_mark)
    *load->max_mark = mark;
  if (load->found (load->opaque, b, mark) == -1)
    return kept_fail (ko, false, "cannot load the marks: %m");
  return 0;
}

/* Passes the marks the log gave the blocks before block end not passed
 * yet, whose pages' marks are zero (a chunk of zeros is not read).
 */
static int
pass_logged (struct kept_overlay *ko, struct load *load, uint64_t end)
{
  const struct kept_log *log = &ko->log;

  for (; load->next < log->nr_blocks && log->blocks[load->next] < end;
       load->next++)
    if (pass_mark (ko, load, log->blocks[load->next],
                   log->marks[load->next]) == -1)
      return -1;
  return 0;
}

/* A chunk of the marks area, len bytes from byte at of it: each mark
 * raised to the one the log gave its block.
 */
static int
load_chunk (struct kept_overlay *ko, const uint8_t *buf, uint64_t at,
            uint64_t len, void *opaque)
{
  const struct kept_log *log = &ko->log;
  struct load *load = opaque;
  uint64_t blocks = kept_blocks (ko), i, b;

  if (pass_logged (ko, load, at / 4) == -1)
    return -1;
  for (i = 0; i < len / 4 && (b = at / 4 + i) < blocks; ++i) {
    uint32_t mark = kept_get_le (buf + 4 * i, 4);

    if (load->next < log->nr_blocks && log->blocks[load->next] == b) {
      if (log->marks[load->next] > mark)
        mark = log->marks[load->next];
      load->next++;
    }
    if (pass_mark (ko, load, b, mark) == -1)
      return -1;
  }
  return 0;
}

int
kept_load_marks (struct kept_overlay *ko, kept_found_mark *found, void *opaque,
                 uint32_t *max_mark)
{
  const struct kept_layout *l = &ko->header.layout;
  struct load load = { found, opaque, max_mark, 0 };

  *max_mark = 0;
  if (kept_read_area (ko, l->marks_offset, l->marks_length,
                      "marks of changes", load_chunk, &load) == -1)
    return -1;
  return pass_logged (ko, &load, UINT64_MAX);
}

/* The table first: with it empty, the marks mean nothing. */
int
kept_clear_history (struct kept_overlay *ko)
{
  const struct kept_layout *l = &ko->header.layout;

  if (!l->history)
    return 0;
  if (kept_zero_area (ko, l->table_offset, 2 * KEPT_TABLE_SIZE,
                      "checkpoints") == -1 ||
      fdatasync (ko->fd) == -1 ||
      kept_zero_area (ko, l->marks_offset, l->marks_length,
                      "marks of changes") == -1 ||
      fdatasync (ko->fd) == -1)
    return kept_fail (ko, false, "cannot clear the checkpoints: %m");
  return 0;
}
