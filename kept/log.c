/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The log of a kept overlay of version 7 on (kept.h,
 * docs/overlay-format.md, "The log"): records of the entries a flush
 * changed (from version 8 on with their blocks' mark), written in the
 * sync of the data they name, and replayed over the state pages when
 * the file is loaded, the last record only if the data it names is
 * durable.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32c.h"
#include "fullio.h"
#include "internal.h"
#include "iszero.h"

#define SECTOR 512
#define HEAD_SIZE 4096          /* the head's page; records follow it */
#define RECORD_HEADER 32
#define RECORD_ENTRY 32

static const char head_magic[8] = { 'n', 'b', 'd', 'k', 'C', 'L', 'O', 'G' };
static const char record_magic[8] = { 'n', 'b', 'd', 'k', 'C', 'R', 'E', 'C' };

enum {
  HEAD_LAP = 8,                 /* the first record's sequence */
  HEAD_DROPPED = 16,            /* blocks the last recovery dropped */
  HEAD_CRC = 20,                /* of the head's sector */
  RECORD_SEQUENCE = 8,
  RECORD_COUNT = 16,
  RECORD_CRC = 20,              /* of the record's bytes, padding not */
  RECORD_MARK = 24,             /* version 8: its blocks' mark */
  RECORD_CLEARS = 28,           /* version 9: the stale count it clears */
};

/* The bytes of a record of n entries, and what it takes in the log:
 * whole sectors, so that each record starts a sector of its own.
 */
static uint64_t
record_bytes (unsigned n)
{
  return RECORD_HEADER + (uint64_t) RECORD_ENTRY * n;
}

static uint64_t
record_span (unsigned n)
{
  return (record_bytes (n) + SECTOR - 1) / SECTOR * SECTOR;
}

/* The units block b of the file holds in entry e, and where unit i of
 * them lies: the slot of its place.
 */
static uint32_t
units_held (const struct kept_overlay *ko, const struct kept_log_entry *e)
{
  if (e->entry < KEPT_ENTRY_SLOT)
    return 0;
  return e->parts ? e->parts : kept_units_all (&ko->header.layout, e->b);
}

static uint64_t
unit_slot (const struct kept_log_entry *e, unsigned i)
{
  return (e->where >> i & 1) ? (uint64_t) e->place1 - 1
                             : (uint64_t) e->entry - KEPT_ENTRY_SLOT;
}

uint32_t
kept_new_units (const struct kept_overlay *ko, const struct kept_log_entry *old,
                const struct kept_log_entry *e)
{
  uint32_t held = units_held (ko, e), was = units_held (ko, old), units = 0;
  unsigned i;

  for (i = 0; i < 32; ++i)
    if ((held >> i & 1) &&
        (!(was >> i & 1) || unit_slot (e, i) != unit_slot (old, i)))
      units |= UINT32_C (1) << i;
  return units;
}

/* Continues crc over units [first, end) of e, whose len bytes are at
 * buf; with fresh, a unit of zeros leaves e->units instead.
 */
static uint32_t
sum_run (const struct kept_overlay *ko, struct kept_log_entry *e,
         unsigned first, unsigned end, const uint8_t *buf, uint64_t len,
         bool fresh, uint32_t crc)
{
  unsigned shift = kept_unit_shift (&ko->header.layout), i;

  for (i = first; i < end; ++i) {
    uint64_t off = (uint64_t) (i - first) << shift;
    uint64_t n = len - off < (UINT64_C (1) << shift) ? len - off
                                                    : UINT64_C (1) << shift;

    if (fresh && is_zero ((const char *) buf + off, n))
      e->units &= ~(UINT32_C (1) << i);
    else
      crc = crc32c (crc, buf + off, n);
  }
  return crc;
}

/* Sets e->crc to the CRC-32C of the units of e->units, each read from
 * its place.  With drop_fresh, a unit of zeros in a slot that lay past
 * the end of the file when it was opened leaves e->units instead: it
 * reads as zeros whether its write reached the disk or not.
 */
static int
sum_units (struct kept_overlay *ko, struct kept_log_entry *e, bool drop_fresh)
{
  const struct kept_layout *l = &ko->header.layout;
  unsigned shift = kept_unit_shift (l), i, j;
  uint64_t start = blockgeom_start (&l->geom, e->b);
  uint64_t bytes = blockgeom_end (&l->geom, e->b) - start;
  uint32_t crc = 0;
  uint8_t *buf;
  int r = 0;

  e->crc = 0;
  if (e->units == 0)
    return 0;
  buf = malloc (bytes);
  if (buf == NULL)
    return kept_fail (ko, false, "malloc: %m");
  for (i = 0; i < 32 && r == 0; i = j) {
    uint64_t slot = unit_slot (e, i), at = (uint64_t) i << shift, len;
    ssize_t got;

    /* A run of units to check lying in one slot: one read. */
    for (j = i; j < 32 && (e->units >> j & 1) && unit_slot (e, j) == slot;
         ++j)
      ;
    if (j == i) {
      j = i + 1;
      continue;
    }
    len = ((uint64_t) j << shift) - at;
    if (at + len > bytes)
      len = bytes - at;
    got = pread (ko->fd, buf, len,
                 l->data_offset + blockgeom_start (&l->geom, slot) + at);
    if (got == -1) {
      r = kept_fail (ko, false, "cannot read the data the log names: %m");
      break;
    }
    /* Past the end of the file reads as the hole it would be. */
    memset (buf + got, 0, len - got);
    crc = sum_run (ko, e, i, j, buf, len,
                   drop_fresh && slot >= ko->log.fresh_slots, crc);
  }
  free (buf);
  e->crc = crc;
  return r;
}

int
kept_log_sum (struct kept_overlay *ko, struct kept_log_entry *e)
{
  return sum_units (ko, e, true);
}

int
kept_log_fresh (struct kept_overlay *ko)
{
  const struct kept_layout *l = &ko->header.layout;
  uint64_t block = blockgeom_block_size (&l->geom);
  struct stat st;

  if (fstat (ko->fd, &st) == -1)
    return kept_fail (ko, false, "fstat: %m");
  ko->log.fresh_slots = (uint64_t) st.st_size <= l->data_offset ? 0
    : ((uint64_t) st.st_size - l->data_offset + block - 1) / block;
  return 0;
}

/* Room is kept after every record for an empty one. */
bool
kept_log_room (const struct kept_overlay *ko, unsigned n)
{
  return n <= KEPT_LOG_ENTRIES &&
         ko->log.next_at + record_span (n) + record_span (0)
         <= ko->header.layout.log_length;
}

static void
encode_entry (uint8_t *p, const struct kept_log_entry *e)
{
  kept_put_le (p, e->b, 8);
  kept_put_le (p + 8, e->entry, 4);
  kept_put_le (p + 12, e->parts, 4);
  kept_put_le (p + 16, e->place1, 4);
  kept_put_le (p + 20, e->where, 4);
  kept_put_le (p + 24, e->units, 4);
  kept_put_le (p + 28, e->crc, 4);
}

static void
decode_entry (const uint8_t *p, struct kept_log_entry *e)
{
  e->b = kept_get_le (p, 8);
  e->entry = kept_get_le (p + 8, 4);
  e->parts = kept_get_le (p + 12, 4);
  e->place1 = kept_get_le (p + 16, 4);
  e->where = kept_get_le (p + 20, 4);
  e->units = kept_get_le (p + 24, 4);
  e->crc = kept_get_le (p + 28, 4);
}

/* The mark a record's blocks take, of the record at buf: version 8
 * on; before, the bytes are zero and the marks pages hold every mark.
 */
static uint32_t
record_mark (const struct kept_overlay *ko, const uint8_t *buf)
{
  if (ko->header.version < KEPT_LOG_MARKS_VERSION)
    return 0;
  return kept_get_le (buf + RECORD_MARK, 4);
}

int
kept_log_write (struct kept_overlay *ko, const struct kept_log_entry *entries,
                unsigned n, uint32_t mark, uint32_t clears)
{
  uint64_t span = record_span (n);
  uint8_t *buf = calloc (1, span);
  unsigned i;
  int r = 0;

  if (buf == NULL)
    return kept_fail (ko, false, "malloc: %m");
  if (ko->log.next_at + span > ko->header.layout.log_length) {
    free (buf);
    errno = ENOSPC;
    return kept_fail (ko, false, "flush: the log is full");
  }
  memcpy (buf, record_magic, sizeof record_magic);
  kept_put_le (buf + RECORD_SEQUENCE, ko->log.next_sequence, 8);
  kept_put_le (buf + RECORD_COUNT, n, 4);
  if (ko->header.version >= KEPT_LOG_MARKS_VERSION)
    kept_put_le (buf + RECORD_MARK, mark, 4);
  if (ko->header.version >= KEPT_STALE_COUNT_VERSION)
    kept_put_le (buf + RECORD_CLEARS, clears, 4);
  for (i = 0; i < n; ++i)
    encode_entry (buf + RECORD_HEADER + RECORD_ENTRY * i, &entries[i]);
  kept_put_le (buf + RECORD_CRC,
               kept_crc_without (buf, record_bytes (n), RECORD_CRC), 4);
  if (pwrite_full (ko->fd, buf, span,
                   ko->header.layout.log_offset + ko->log.next_at) == -1 ||
      fdatasync (ko->fd) == -1) {
    ko->log.failed = true;
    r = kept_fail (ko, false, "flush: %m");
  }
  else {
    ko->log.next_at += span;
    ko->log.next_sequence++;
    ko->log.records++;
  }
  free (buf);
  return r;
}

int
kept_log_reset (struct kept_overlay *ko, uint32_t dropped)
{
  /* One past the next sequence: a record whose sync failed, or that a
   * load dropped, may lie in the log with it.
   */
  uint64_t lap = ko->log.next_sequence + 1;
  uint8_t head[SECTOR] = { 0 };

  memcpy (head, head_magic, sizeof head_magic);
  kept_put_le (head + HEAD_LAP, lap, 8);
  kept_put_le (head + HEAD_DROPPED, dropped, 4);
  kept_put_le (head + HEAD_CRC, kept_crc_without (head, SECTOR, HEAD_CRC), 4);
  if (pwrite_full (ko->fd, head, SECTOR, ko->header.layout.log_offset) == -1 ||
      fdatasync (ko->fd) == -1)
    return kept_fail (ko, false, "flush: %m");
  ko->log.lap = ko->log.next_sequence = lap;
  ko->log.next_at = HEAD_SIZE;
  ko->log.records = 0;
  ko->log.failed = false;
  ko->log.dropped_before = dropped;
  return 0;
}

void
kept_log_start (struct kept_log *log)
{
  *log = (struct kept_log) { .lap = 1, .next_sequence = 1,
                             .next_at = HEAD_SIZE };
}

void
kept_log_free (struct kept_log *log)
{
  free (log->blocks);
  free (log->marks);
  log->blocks = NULL;
  log->marks = NULL;
  log->nr_blocks = 0;
}

/* Reads the head: a sector of zeros (never written) is the empty log
 * of lap 1.
 */
static int
read_head (struct kept_overlay *ko, const uint8_t *head)
{
  struct kept_log *log = &ko->log;

  log->lap = 1;
  log->dropped_before = 0;
  if (is_zero ((const char *) head, SECTOR))
    return 0;
  if (memcmp (head, head_magic, sizeof head_magic) != 0 ||
      kept_get_le (head + HEAD_CRC, 4) !=
      kept_crc_without (head, SECTOR, HEAD_CRC) ||
      kept_get_le (head + HEAD_LAP, 8) == 0)
    return kept_fail (ko, true, "corrupted log (its head is damaged)");
  log->lap = kept_get_le (head + HEAD_LAP, 8);
  log->dropped_before = kept_get_le (head + HEAD_DROPPED, 4);
  return 0;
}

/* The entries of the record at buf (len bytes of the log from it on) if
 * it is whole and the one of sequence, else -1.
 */
static int64_t
record_at (const uint8_t *buf, uint64_t len, uint64_t sequence)
{
  uint64_t n;

  if (len < RECORD_HEADER ||
      memcmp (buf, record_magic, sizeof record_magic) != 0 ||
      kept_get_le (buf + RECORD_SEQUENCE, 8) != sequence)
    return -1;
  n = kept_get_le (buf + RECORD_COUNT, 4);
  if (n > KEPT_LOG_ENTRIES || record_span (n) > len ||
      kept_get_le (buf + RECORD_CRC, 4) !=
      kept_crc_without (buf, record_bytes (n), RECORD_CRC))
    return -1;
  return n;
}

/* Whether the slots of entry e lie within the file's length. */
static bool
within_file (const struct kept_overlay *ko, const struct kept_log_entry *e,
             uint64_t file_length)
{
  const struct kept_layout *l = &ko->header.layout;

  if (e->entry >= KEPT_ENTRY_SLOT &&
      kept_slot_end (l, e->b, e->entry - KEPT_ENTRY_SLOT) > file_length)
    return false;
  return e->place1 == 0 ||
         kept_slot_end (l, e->b, e->place1 - 1) <= file_length;
}

/* Whether the data each entry of the record at buf names (n entries)
 * is what it was when the record was written: its slots within the
 * file and its checksums matching.
 */
static int
record_durable (struct kept_overlay *ko, const uint8_t *buf, unsigned n,
                uint64_t file_length, bool *durable)
{
  unsigned i;

  *durable = true;
  for (i = 0; i < n && *durable; ++i) {
    struct kept_log_entry e, sum;

    decode_entry (buf + RECORD_HEADER + RECORD_ENTRY * i, &e);
    if (e.b >= kept_blocks (ko))
      continue;                 /* damage, which the load reports */
    /* Units the entry does not hold cannot have been checked; a slot
     * past the end of the file (its length not durable) holds nothing.
     */
    if ((e.units & ~units_held (ko, &e)) != 0 ||
        !within_file (ko, &e, file_length)) {
      *durable = false;
      return 0;
    }
    sum = e;
    if (sum_units (ko, &sum, false) == -1)
      return -1;
    *durable = sum.crc == e.crc;
  }
  return 0;
}

/* Version 9: clears the header's MARKS_STALE if the last of the
 * records applied (the first records at buf) that clears a stale
 * count clears the header's: the records hold the marks of every
 * change since the flag was set that time.
 */
static void
clear_stale (struct kept_overlay *ko, const uint8_t *buf, uint64_t records)
{
  struct kept_header *h = &ko->header;
  uint64_t at = 0, i;
  uint32_t cleared = 0;

  if (h->version < KEPT_STALE_COUNT_VERSION)
    return;
  for (i = 0; i < records; ++i) {
    uint32_t clears = kept_get_le (buf + at + RECORD_CLEARS, 4);

    if (clears != 0)
      cleared = clears;
    at += record_span (kept_get_le (buf + at + RECORD_COUNT, 4));
  }
  if (cleared != 0 && cleared == h->stale_count)
    h->flags &= ~KEPT_MARKS_STALE;
}

/* Orders entries by block, then by their place in the log; each with
 * its record's mark.
 */
struct logged {
  struct kept_log_entry e;
  uint64_t order;
  uint32_t mark;
};

static int
compare_logged (const void *a, const void *b)
{
  const struct logged *x = a, *y = b;

  if (x->e.b != y->e.b)
    return x->e.b < y->e.b ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* Keeps of list (n entries, sorted) the last entry of each block, in
 * log->blocks and log->marks and, the entries themselves, in *last
 * (log->nr_blocks of them).
 */
static int
keep_last (struct kept_overlay *ko, const struct logged *list, uint64_t n,
           struct kept_log_entry **last)
{
  struct kept_log *log = &ko->log;
  uint64_t i;

  log->blocks = malloc ((n ? n : 1) * sizeof *log->blocks);
  log->marks = malloc ((n ? n : 1) * sizeof *log->marks);
  *last = malloc ((n ? n : 1) * sizeof **last);
  if (log->blocks == NULL || log->marks == NULL || *last == NULL)
    return kept_fail (ko, false, "malloc: %m");
  for (i = 0; i < n; ++i)
    if (i + 1 == n || list[i + 1].e.b != list[i].e.b) {
      if (list[i].e.b >= kept_blocks (ko))
        return kept_fail (ko, true, "corrupted log (a record names block "
                          "%" PRIu64 ", past the disk)", list[i].e.b);
      (*last)[log->nr_blocks] = list[i].e;
      log->marks[log->nr_blocks] = list[i].mark;
      log->blocks[log->nr_blocks++] = list[i].e.b;
    }
  return 0;
}

/* The records of the log, from HEAD_SIZE on in buf (len bytes), in
 * sequence: sets log->records and where the next goes; returns how
 * many entries they hold, the last record's last.
 */
static uint64_t
walk (struct kept_log *log, const uint8_t *buf, uint64_t len,
      uint64_t *last_at, unsigned *last_n)
{
  uint64_t at = 0, entries = 0;
  int64_t n;

  log->records = 0;
  while ((n = record_at (buf + at, len - at, log->lap + log->records)) >= 0) {
    *last_at = at;
    *last_n = n;
    entries += n;
    at += record_span (n);
    log->records++;
  }
  log->next_sequence = log->lap + log->records;
  log->next_at = HEAD_SIZE + at;
  return entries;
}

/* Counts into log->lost_records the whole records of a sequence past
 * the log's end that lie after it, from at on in buf (len bytes), and
 * their entries into log->lost.  None can follow a record a crash cut
 * off, since each is written after the sync of the one before: they
 * say that the record ending the log was damaged after its flush.
 * Those of an earlier lap have a lower sequence.
 */
static void
count_lost (struct kept_log *log, const uint8_t *buf, uint64_t len,
            uint64_t at)
{
  uint64_t end = log->lap + log->records;

  for (at += SECTOR; at + RECORD_HEADER <= len; at += SECTOR) {
    uint64_t sequence = kept_get_le (buf + at + RECORD_SEQUENCE, 8);
    int64_t n;

    if (sequence <= end ||
        (n = record_at (buf + at, len - at, sequence)) < 0)
      continue;
    log->lost_records++;
    log->lost += n;
    at += record_span (n) - SECTOR;
  }
}

void
kept_log_lost_words (const struct kept_log *log,
                     char words[KEPT_LOG_LOST_WORDS])
{
  snprintf (words, KEPT_LOG_LOST_WORDS, "the log ends at a damaged record, "
            "and %" PRIu64 " whole records after it, the flushes of %"
            PRIu64 " blocks, are lost with it", log->lost_records, log->lost);
}

int
kept_log_read (struct kept_overlay *ko, uint64_t file_length,
               struct kept_log_entry **last)
{
  const struct kept_layout *l = &ko->header.layout;
  struct kept_log *log = &ko->log;
  uint64_t len = l->log_length - HEAD_SIZE, last_at = 0, total, at, k = 0;
  unsigned last_n = 0, n;
  uint8_t *buf = malloc (l->log_length);
  struct logged *list = NULL;
  bool durable = true;
  int r = -1;

  *last = NULL;
  kept_log_free (log);
  *log = (struct kept_log) { 0 };
  if (buf == NULL)
    return kept_fail (ko, false, "malloc: %m");
  if (pread_full (ko->fd, buf, l->log_length, l->log_offset) == -1) {
    kept_fail (ko, false, "cannot read the log: %m");
    goto out;
  }
  if (read_head (ko, buf) == -1)
    goto out;
  total = walk (log, buf + HEAD_SIZE, len, &last_at, &last_n);
  count_lost (log, buf + HEAD_SIZE, len, log->next_at - HEAD_SIZE);
  /* The last record only if what it names reached the disk: a record
   * after it would have been written only once it had.
   */
  if (log->records > 0 &&
      record_durable (ko, buf + HEAD_SIZE + last_at, last_n, file_length,
                      &durable) == -1)
    goto out;
  if (!durable) {
    log->dropped = last_n;
    log->records--;
    log->next_sequence--;
    log->next_at = HEAD_SIZE + last_at;
    total -= last_n;
  }
  log->replayed = log->records;
  clear_stale (ko, buf + HEAD_SIZE, log->records);
  list = malloc ((total ? total : 1) * sizeof *list);
  if (list == NULL) {
    kept_fail (ko, false, "malloc: %m");
    goto out;
  }
  for (at = 0; k < total; at += record_span (n)) {
    unsigned i;

    n = kept_get_le (buf + HEAD_SIZE + at + RECORD_COUNT, 4);
    for (i = 0; i < n; ++i, ++k) {
      decode_entry (buf + HEAD_SIZE + at + RECORD_HEADER + RECORD_ENTRY * i,
                    &list[k].e);
      list[k].order = k;
      list[k].mark = record_mark (ko, buf + HEAD_SIZE + at);
    }
  }
  qsort (list, total, sizeof *list, compare_logged);
  r = keep_last (ko, list, total, last);
 out:
  free (list);
  free (buf);
  return r;
}

int
kept_log_apply (struct kept_overlay *ko, struct statemap *states,
                const struct kept_log_entry *last, uint64_t file_length,
                struct kept_damage *damage)
{
  uint64_t i;

  for (i = 0; i < ko->log.nr_blocks; ++i)
    if (kept_load_logged (ko, states, &last[i], file_length, damage) == -1)
      return -1;
  return 0;
}
