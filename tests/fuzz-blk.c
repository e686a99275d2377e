/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A libFuzzer target: differential fuzzing of the block layer
 * (filters/cow/blk.c) over either store against a plain byte-array
 * model.
 *
 * Each input is a geometry (block size and stripes, the store:
 * throw-away, its slots of the files among another overlay's or not,
 * or kept; disk size; built with chunks of one block, so requests
 * cross stripes and slots)
 * followed by a sequence of operations: reads (plain and cow-on-read),
 * writes, zeroes with and without trim, trims and copy-ups at any
 * offset and length, a point-in-time view made, read (checked against
 * the model as it was when the view was made) and deleted (ended by
 * a crash or reopen of a kept overlay), each optionally with a fault:
 * the n-th base read
 * fails, the n-th overlay read or write fails, or hole punching is
 * unsupported; and flushes, crashes and clean reopens of a kept
 * overlay.  The base is an in-memory pattern with holes (see
 * chunk_of); the overlay is a real file.
 *
 * The model holds, for each byte, its value and, after a failed
 * request, the one other value it may have (a failed write leaves each
 * byte old or new, never anything else: no block is marked allocated
 * without its data), or that it may be anything.  A crash (the kept
 * file copied as kill -9 leaves it: its data written, its states as
 * last flushed, and opened again) lets each byte read as it did at the
 * last flush or as it does now, or as zeros where a discard punched
 * it.  Every read, and every extent the layer reports as zero, is
 * checked against the model, and a request may fail only where a fault
 * was injected into it; a mismatch or such a failure aborts, which
 * libFuzzer reports with the input that caused it.
 *
 * A crash whose fault byte is odd is a power cut instead, inside one
 * of the next syncs of the kept file (the byte says which): the file
 * as the sync before left it (a copy made at each sync), with each
 * sector of each write since, each punch since, and its length as now
 * or as synced, kept or not as the rest of the input says.  The
 * request that sync was part of never returned (a flush made nothing
 * durable), and once it is done the overlay opens that file.  Then a
 * byte written with two values since the last flush may read as
 * anything (an intermediate value made durable by a sync between);
 * the others as at the last flush, or as now, or as zeros where a
 * discard punched.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined with
 * -Wl,--wrap=pread_full,--wrap=pwrite_full,--wrap=fallocate and
 * --wrap=fsync,--wrap=fdatasync (see Makefile.am).  Faults come through
 * the wrapped calls, so the real overlay code runs; a sync of the kept
 * file copies it, for the power cuts.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "blk.h"
#include "fullio.h"
#include "space.h"
#include "stripes.h"
#include "tempfiles.h"

#define MAX_DISK (256 * 1024)
#define MAX_OPS 64

/* The nbdkit functions blk.c calls: messages are dropped (a fuzzer
 * prints millions of them), the errno convention kept.
 */
void
nbdkit_error (const char *fs, ...)
{
}

void
nbdkit_debug (const char *fs, ...)
{
}

/*----------------------------------------------------------------------
 * Faults.  Each counter counts down to the call that fails (0: none).
 */

static unsigned fail_base_read_at, fail_overlay_read_at, fail_overlay_write_at;
static bool punch_unsupported;
/* Whether a fault struck the request running: one that fails without
 * one is a bug.
 */
static bool injected;

static bool
trips (unsigned *at)
{
  if (*at == 0 || --*at != 0)
    return false;
  injected = true;
  return true;
}

int __real_pread_full (int fd, void *buf, size_t count, off_t offset);
int __real_pwrite_full (int fd, const void *buf, size_t count, off_t offset);
int __real_fallocate (int fd, int mode, off_t offset, off_t len);

/*----------------------------------------------------------------------
 * Power cuts: the kept file as its last sync left it (synced_path, a
 * copy), and the writes and punches made on it since, in order.
 */

struct unsynced {
  off_t offset;
  size_t len;
  uint8_t *data;                /* NULL: zeros (a punch or zeroing) */
};

static const char *kept_path;   /* NULL: no kept file open */
static dev_t kept_dev;
static ino_t kept_ino;
static char synced_path[96];
static struct unsynced *unsynced;
static size_t nr_unsynced, cap_unsynced;

/* A power cut armed: at the sync that counts cut_in down to 0, the
 * file it leaves is written to cut_path (cut_taken), of cut_seed.
 */
static unsigned cut_in;
static bool cut_taken;
static uint32_t cut_seed;
static char cut_path[96];

static void copy_file (const char *from, const char *to);

static bool
is_kept (int fd)
{
  struct stat st;

  return kept_path && fstat (fd, &st) == 0 && st.st_dev == kept_dev &&
         st.st_ino == kept_ino;
}

static void
forget_unsynced (void)
{
  while (nr_unsynced > 0)
    free (unsynced[--nr_unsynced].data);
}

/* A sync of the kept file: the copy taken anew. */
static void
kept_synced (void)
{
  copy_file (kept_path, synced_path);
  forget_unsynced ();
}

/* The kept file at path is opened (made if missing). */
static void
kept_opened (const char *path)
{
  struct stat st;
  int fd = open (path, O_WRONLY | O_CREAT, 0600);

  if (fd == -1 || fstat (fd, &st) == -1)
    abort ();
  close (fd);
  kept_path = path;
  kept_dev = st.st_dev;
  kept_ino = st.st_ino;
  snprintf (synced_path, sizeof synced_path, "%s.synced", path);
  snprintf (cut_path, sizeof cut_path, "%s.cut", path);
  kept_synced ();
}

static void
note_unsynced (int fd, const void *data, size_t len, off_t offset)
{
  struct unsynced *u;

  if (len == 0 || !is_kept (fd))
    return;
  if (nr_unsynced == cap_unsynced) {
    cap_unsynced = cap_unsynced ? 2 * cap_unsynced : 64;
    unsynced = realloc (unsynced, cap_unsynced * sizeof *unsynced);
    if (unsynced == NULL)
      abort ();
  }
  u = &unsynced[nr_unsynced++];
  u->offset = offset;
  u->len = len;
  u->data = NULL;
  if (data && (u->data = malloc (len)) == NULL)
    abort ();
  if (data)
    memcpy (u->data, data, len);
}

/* The next of a xorshift sequence: whether a power cut keeps a piece. */
static bool
keeps (uint32_t *seed)
{
  *seed ^= *seed << 13;
  *seed ^= *seed >> 17;
  *seed ^= *seed << 5;
  return *seed & 1;
}

/* Writes to out the kept file as a power cut may leave it, each piece
 * kept or not as seed says.
 */
static void
power_image (const char *out, uint32_t seed)
{
  struct stat now, synced;
  size_t i, at, next;
  int fd;

  copy_file (synced_path, out);
  fd = open (out, O_WRONLY);
  if (fd == -1 || stat (kept_path, &now) == -1 ||
      stat (synced_path, &synced) == -1)
    abort ();
  for (i = 0; i < nr_unsynced; ++i) {
    const struct unsynced *u = &unsynced[i];

    if (u->data == NULL) {
      if (keeps (&seed) &&
          __real_fallocate (fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                            u->offset, u->len) == -1)
        abort ();
      continue;
    }
    /* Sector by sector: a disk writes each whole or not at all. */
    for (at = 0; at < u->len; at = next) {
      next = ((u->offset + at) / 512 + 1) * 512 - u->offset;
      if (next > u->len)
        next = u->len;
      if (keeps (&seed) &&
          __real_pwrite_full (fd, u->data + at, next - at, u->offset + at)
          == -1)
        abort ();
    }
  }
  if (ftruncate (fd, keeps (&seed) ? now.st_size : synced.st_size) == -1)
    abort ();
  close (fd);
}

int
__wrap_pread_full (int fd, void *buf, size_t count, off_t offset)
{
  if (trips (&fail_overlay_read_at)) {
    errno = EIO;
    return -1;
  }
  return __real_pread_full (fd, buf, count, offset);
}

int
__wrap_pwrite_full (int fd, const void *buf, size_t count, off_t offset)
{
  if (trips (&fail_overlay_write_at)) {
    /* Fail halfway, as a full disk would: part of it is written. */
    if (count > 1 && __real_pwrite_full (fd, buf, count / 2, offset) == 0)
      note_unsynced (fd, buf, count / 2, offset);
    errno = ENOSPC;
    return -1;
  }
  if (__real_pwrite_full (fd, buf, count, offset) == -1)
    return -1;
  note_unsynced (fd, buf, count, offset);
  return 0;
}

int
__wrap_fsync (int fd)
{
  if (!is_kept (fd))
    return 0;
  if (cut_in > 0 && --cut_in == 0) {
    power_image (cut_path, cut_seed);
    cut_taken = true;
  }
  kept_synced ();
  return 0;
}

int
__wrap_fdatasync (int fd)
{
  return __wrap_fsync (fd);
}

int
__wrap_fallocate (int fd, int mode, off_t offset, off_t len)
{
  if (punch_unsupported) {
    injected = true;
    errno = EOPNOTSUPP;
    return -1;
  }
  if (__real_fallocate (fd, mode, offset, len) == -1)
    return -1;
  /* A punch or a zeroing: zeros, which a power cut keeps or not. */
  if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
    note_unsynced (fd, NULL, len, offset);
  return 0;
}

/*----------------------------------------------------------------------
 * The base and the model.
 */

static uint64_t disk_size, block_size;

/* The base in 64K chunks, in turn: data; zeros it reports as zeros
 * (the hole of a sparse image, which the layer need not read); zeros
 * it does not report (which the layer finds only by reading).
 */
enum chunk { DATA, HOLE, UNREPORTED_ZEROS };

static enum chunk
chunk_of (uint64_t x)
{
  return (x >> 16) % 3;
}

static uint8_t
base_byte (uint64_t x)
{
  return chunk_of (x) == DATA ? (uint8_t) (x * 131 + (x >> 9) + 7) : 0;
}

static int
base_pread (void *opaque, void *buf, uint32_t count, uint64_t offset,
            int *err)
{
  uint8_t *p = buf;
  uint32_t i;

  if (offset + count > disk_size)
    abort ();                   /* the layer read past the base */
  if (trips (&fail_base_read_at)) {
    *err = EIO;
    return -1;
  }
  for (i = 0; i < count; ++i)
    p[i] = base_byte (offset + i);
  return 0;
}

/* Reports the chunks from offset on, HOLE as zero and the rest as
 * data, but never more than three of them: a plugin may answer for a
 * prefix only.
 */
static int
base_describe (void *opaque, uint32_t count, uint64_t offset,
               blk_found_run *found, void *found_opaque)
{
  uint64_t at = offset, end = offset + count;
  int chunks;

  if (end > disk_size)
    abort ();                   /* the layer asked past the base */
  for (chunks = 0; chunks < 3 && at < end; ++chunks) {
    uint64_t next = (at | 0xffff) + 1;

    if (next > end)
      next = end;
    found (found_opaque, at, next - at, chunk_of (at) == HOLE);
    at = next;
  }
  return 0;
}

static const struct blk_base base = { .pread = base_pread,
                                      .describe = base_describe };

enum certainty { EXACT, TWO, ANY };
static uint8_t value[MAX_DISK], other[MAX_DISK], certainty[MAX_DISK];

/* A kept overlay's model as of its last flush, and the bytes a discard
 * has punched since.
 */
static uint8_t durable_value[MAX_DISK], durable_other[MAX_DISK];
static uint8_t durable_certainty[MAX_DISK];
static bool discarded[MAX_DISK];

/* Since the last flush, the byte a zero or trim found where hole
 * punching was unsupported, which stays in the slot the flushed states
 * may still name (left_many: more than one such byte).
 */
static uint8_t left_value[MAX_DISK];
static bool left[MAX_DISK], left_many[MAX_DISK];

/* Since the last flush, bytes a request set (touched), and of those
 * set to two values (many), one of which a sync between may have made
 * durable: a power cut may bring that back.
 */
static bool touched[MAX_DISK], touched_many[MAX_DISK];

/* Byte x was set to v by a request that succeeded (ok) or failed. */
static void
model_set (uint64_t x, uint8_t v, bool ok)
{
  if (touched[x] && (certainty[x] != EXACT || value[x] != v))
    touched_many[x] = true;
  touched[x] = true;
  if (ok) {
    value[x] = v;
    certainty[x] = EXACT;
  }
  else if (certainty[x] == EXACT && value[x] != v) {
    other[x] = v;
    certainty[x] = TWO;
  }
  else if (certainty[x] == TWO && value[x] != v && other[x] != v)
    certainty[x] = ANY;
}

/* A flush made the model durable. */
static void
model_flushed (void)
{
  memcpy (durable_value, value, disk_size);
  memcpy (durable_other, other, disk_size);
  memcpy (durable_certainty, certainty, disk_size);
  memset (discarded, 0, disk_size);
  memset (left, 0, disk_size);
  memset (left_many, 0, disk_size);
  memset (touched, 0, disk_size);
  memset (touched_many, 0, disk_size);
}

/* A zero or trim of [offset, end) where hole punching is unsupported:
 * the bytes it replaces may stay in their slot, which a crash may bring
 * back (an unflushed write, then an unflushed zero).
 */
static void
model_unpunched (uint64_t offset, uint64_t end)
{
  uint64_t x;

  for (x = offset; x < end; ++x) {
    if (certainty[x] != EXACT || (left[x] && left_value[x] != value[x]))
      left_many[x] = true;
    left[x] = true;
    left_value[x] = value[x];
  }
}

/* A crash: each byte reads as at the last flush, or as now (the data
 * of its block, in the slot the flushed states name), or as zeros
 * where a discard punched that slot, or as what a discard that could
 * not punch left there.
 */
static void
model_crashed (bool power)
{
  uint64_t x;

  for (x = 0; x < disk_size; ++x) {
    if (certainty[x] == ANY || durable_certainty[x] == ANY || left_many[x] ||
        (power && touched_many[x])) {
      certainty[x] = ANY;
      continue;
    }
    if (left[x])
      model_set (x, left_value[x], false);
    model_set (x, durable_value[x], false);
    if (durable_certainty[x] == TWO)
      model_set (x, durable_other[x], false);
    if (discarded[x])
      model_set (x, 0, false);
  }
}

static bool
model_allows (uint64_t x, uint8_t v)
{
  switch (certainty[x]) {
  case EXACT: return value[x] == v;
  case TWO: return value[x] == v || other[x] == v;
  default: return true;
  }
}

static uint8_t
data_byte (unsigned op, uint64_t x)
{
  return (uint8_t) (op * 37 + x * 11 + 1);
}

static void
check_read (const uint8_t *buf, uint64_t offset, uint32_t count)
{
  uint32_t i;

  for (i = 0; i < count; ++i)
    if (!model_allows (offset + i, buf[i])) {
      fprintf (stderr, "fuzz-blk: byte %" PRIu64 " read 0x%02x, model 0x%02x"
               " (certainty %d)\n", offset + i, buf[i], value[offset + i],
               certainty[offset + i]);
      abort ();
    }
}

/* Every run the layer reports as BLK_ZERO must be zero in the model,
 * and the statistics must count the blocks of each state the runs
 * show: a block with runs both allocated and not is held in part, and
 * counts as allocated and as partial.
 */
static void
check_states (struct blk *blk)
{
  uint64_t offset = 0, blocks[BLK_STATES] = { 0, 0, 0, 0 }, b;
  unsigned char seen[MAX_DISK / 4096] = { 0 };  /* bit 1 << state */
  struct blk_stats stats;

  while (offset < disk_size) {
    enum blk_state state;
    uint64_t end = blk_state_run (blk, offset, disk_size, &state);

    if (end <= offset || state == BLK_PARTIAL)
      abort ();
    for (b = offset / block_size; b < (end + block_size - 1) / block_size; ++b)
      seen[b] |= 1 << state;
    if (state == BLK_ZERO)
      for (; offset < end; ++offset)
        if (!model_allows (offset, 0)) {
          fprintf (stderr, "fuzz-blk: byte %" PRIu64 " in a zero extent\n",
                   offset);
          abort ();
        }
    offset = end;
  }
  for (b = 0; b < (disk_size + block_size - 1) / block_size; ++b)
    switch (seen[b]) {
    case 1 << BLK_NOT_ALLOCATED: blocks[BLK_NOT_ALLOCATED]++; break;
    case 1 << BLK_ALLOCATED: blocks[BLK_ALLOCATED]++; break;
    case 1 << BLK_ZERO: blocks[BLK_ZERO]++; break;
    case 1 << BLK_ALLOCATED | 1 << BLK_NOT_ALLOCATED:
      blocks[BLK_ALLOCATED]++;
      blocks[BLK_PARTIAL]++;
      break;
    default:
      fprintf (stderr, "fuzz-blk: block %" PRIu64 " shows states %#x\n",
               b, seen[b]);
      abort ();
    }
  blk_get_stats (blk, &stats);
  if (memcmp (blocks, stats.blocks, sizeof blocks) != 0) {
    fprintf (stderr, "fuzz-blk: statistics count blocks %" PRIu64 "/%" PRIu64
             "/%" PRIu64 "/%" PRIu64 ", runs show %" PRIu64 "/%" PRIu64
             "/%" PRIu64 "/%" PRIu64 "\n",
             stats.blocks[0], stats.blocks[1], stats.blocks[2],
             stats.blocks[3], blocks[0], blocks[1], blocks[2], blocks[3]);
    abort ();
  }
}

/*----------------------------------------------------------------------
 * Decoding the input.
 */

struct input {
  const uint8_t *p;
  size_t n;
};

static unsigned
take (struct input *in, unsigned bytes)
{
  unsigned v = 0;

  while (bytes-- > 0) {
    v = v << 8 | (in->n ? *in->p : 0);
    if (in->n) {
      in->p++;
      in->n--;
    }
  }
  return v;
}

enum fuzz_op {
  F_READ, F_READ_COW, F_WRITE, F_ZERO_TRIM, F_ZERO_NO_TRIM, F_TRIM, F_COPY_UP,
  F_FLUSH, F_CRASH, F_REOPEN, F_VIEW_CREATE, F_VIEW_READ, F_VIEW_DELETE,
  NR_FUZZ_OPS
};

/* The model of the point-in-time view: the model as it was when the
 * view was made.
 */
static bool view_live;
static uint8_t view_value[MAX_DISK], view_other[MAX_DISK];
static uint8_t view_certainty[MAX_DISK];

/* Whether the view broke: a write whose fault said the overlay's
 * filesystem is full breaks it, as it should.
 */
static bool
view_broken (struct blk *blk)
{
  char name[CHECKPOINT_NAME_MAX + 1];
  uint64_t kept;

  return blk_view_get (blk, name, &kept) == BLK_VIEW_BROKEN;
}

static void
view_made (void)
{
  view_live = true;
  memcpy (view_value, value, disk_size);
  memcpy (view_other, other, disk_size);
  memcpy (view_certainty, certainty, disk_size);
}

/* Every byte read from the view, and every run it reports as zero,
 * as the view's model allows.
 */
static void
check_view (struct blk *blk, const uint8_t *buf, uint64_t offset,
            uint32_t count)
{
  uint64_t x, end = offset + count;

  for (x = offset; x < end; ++x) {
    bool ok;

    switch (view_certainty[x]) {
    case EXACT: ok = view_value[x] == buf[x - offset]; break;
    case TWO: ok = view_value[x] == buf[x - offset] ||
                   view_other[x] == buf[x - offset]; break;
    default: ok = true;
    }
    if (!ok) {
      fprintf (stderr, "fuzz-blk: view byte %" PRIu64 " read 0x%02x, model"
               " 0x%02x\n", x, buf[x - offset], view_value[x]);
      abort ();
    }
  }
  for (x = offset; x < end; ) {
    enum blk_state state;
    uint64_t run_end = blk_view_state_run (blk, "v", x, end, &state);

    if (run_end <= x)
      abort ();
    for (; state == BLK_ZERO && x < run_end; ++x)
      if (view_certainty[x] == EXACT && view_value[x] != 0) {
        fprintf (stderr, "fuzz-blk: view byte %" PRIu64 " in a zero extent\n",
                 x);
        abort ();
      }
    x = run_end;
  }
}

/* Whole blocks of [offset, end): what a discard (a trim, a zero with
 * trim) turns to zeros and punches.
 */
static void
model_discard (uint64_t offset, uint64_t end)
{
  uint64_t b = (offset + block_size - 1) / block_size * block_size;

  for (; b < end; b += block_size) {
    uint64_t stop = b + block_size < disk_size ? b + block_size : disk_size;
    uint64_t x;
    if (stop > end)
      break;
    for (x = b; x < stop; ++x) {
      model_set (x, 0, true);
      discarded[x] = true;
    }
  }
}

/*----------------------------------------------------------------------
 * The overlay: throw-away, or kept in a file that a crash leaves as
 * kill -9 would, and that is then opened again.
 */

struct overlay {
  struct blk *blk;
  struct space space;
  struct temp_files *files;     /* throw-away; NULL if kept */
  char path[64];                /* kept */
  unsigned stripes;
};

/* Makes (throw-away) or opens (kept) the overlay and sizes it. */
static void
overlay_open (struct overlay *o)
{
  space_init (&o->space, SPACECAP_NO_LIMIT);
  if (o->files)
    o->blk = blk_new (block_size, o->stripes, o->files, &o->space);
  else {
    kept_opened (o->path);
    o->blk = blk_new_kept (block_size, o->stripes, o->path, "", &o->space);
  }
  if (o->blk == NULL || blk_set_size (o->blk, disk_size) == -1)
    abort ();
}

/* Another throw-away overlay of o's files and size, which writes
 * every other chunk of its disk, the last first: o's chunks then take
 * the slots between and after its own.
 */
static struct blk *
interleaved_overlay (struct overlay *o)
{
  static uint8_t junk[MAX_DISK];
  static struct space space;
  uint64_t chunk_bytes = UINT64_C (1) << o->files->chunk_shift;
  uint64_t chunk = (disk_size + chunk_bytes - 1) / chunk_bytes;
  struct blk *other;
  int err;

  space_init (&space, SPACECAP_NO_LIMIT);
  other = blk_new (block_size, o->stripes, o->files, &space);
  if (other == NULL || blk_set_size (other, disk_size) == -1)
    abort ();
  memset (junk, 0xee, sizeof junk);
  while (chunk-- > 0)
    if (chunk % 2 == 0) {
      uint64_t at = chunk * chunk_bytes;
      uint64_t n = disk_size - at < chunk_bytes ? disk_size - at : chunk_bytes;

      if (blk_write (other, &base, junk, n, at, &err) == -1)
        abort ();
    }
  return other;
}

/* Copies the file at from to to, its holes left holes. */
static void
copy_file (const char *from, const char *to)
{
  static char buf[65536];
  int in = open (from, O_RDONLY), out;
  off_t length, data = 0, hole;

  out = open (to, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (in == -1 || out == -1)
    abort ();
  length = lseek (in, 0, SEEK_END);
  while (data < length && (data = lseek (in, data, SEEK_DATA)) != -1) {
    hole = lseek (in, data, SEEK_HOLE);
    while (data < hole) {
      size_t n = hole - data < (off_t) sizeof buf ? hole - data : sizeof buf;
      if (__real_pread_full (in, buf, n, data) == -1 ||
          __real_pwrite_full (out, buf, n, data) == -1)
        abort ();
      data += n;
    }
  }
  if (ftruncate (out, length) == -1)
    abort ();
  close (in);
  close (out);
}

/* A kept overlay stopped by kill -9 (the file as it is now), or by
 * the power cut taken (cut_taken), and opened again.
 */
static void
overlay_crash (struct overlay *o)
{
  char copy[80];
  bool power = cut_taken;
  unsigned armed = cut_in;

  snprintf (copy, sizeof copy, "%s.crashed", o->path);
  if (!power)
    copy_file (o->path, copy);
  /* What the close does, a killed server never did: no cut there. */
  cut_in = 0;
  blk_free (o->blk);
  cut_in = armed;
  if (rename (power ? cut_path : copy, o->path) == -1)
    abort ();
  cut_taken = false;
  model_crashed (power);
  overlay_open (o);
}

/* A kept overlay closed cleanly and opened again. */
static void
overlay_reopen (struct overlay *o)
{
  if (blk_free (o->blk) == -1)
    abort ();
  if (!cut_taken)               /* else a power cut struck the close */
    model_flushed ();
  overlay_open (o);
}

static void
run_op (struct overlay *o, unsigned i, struct input *in, uint8_t *buf)
{
  struct blk *blk = o->blk;
  enum fuzz_op op = take (in, 1) % NR_FUZZ_OPS;
  uint64_t offset = take (in, 3) % disk_size;
  uint32_t count = 1 + take (in, 3) % (disk_size - offset);
  unsigned fault = take (in, 1);
  uint64_t x;
  int err = 0, r = 0;

  /* The low bits choose a fault, the next two when it strikes; 0x40
   * makes a copy-up read the fill's (under cow-fill), 0x80 the overlay
   * unable to punch.
   */
  fail_base_read_at = (fault & 3) == 1 ? 1 + (fault >> 2) % 4 : 0;
  fail_overlay_write_at = (fault & 3) == 2 ? 1 + (fault >> 2) % 4 : 0;
  fail_overlay_read_at = (fault & 3) == 3 ? 1 + (fault >> 2) % 4 : 0;
  punch_unsupported = (fault & 0x80) != 0;
  injected = false;

  switch (op) {
  case F_READ:
  case F_READ_COW:
    r = blk_read (blk, &base, buf, count, offset,
                  op == F_READ ? BLK_READ_ONLY
                  : fault & 0x40 ? BLK_READ_FILL : BLK_READ_COPY_UP, &err);
    if (r == 0)
      check_read (buf, offset, count);
    break;
  case F_WRITE:
    for (x = 0; x < count; ++x)
      buf[x] = data_byte (i, offset + x);
    r = blk_write (blk, &base, buf, count, offset, &err);
    for (x = 0; x < count; ++x)
      model_set (offset + x, buf[x], r == 0);
    break;
  case F_ZERO_TRIM:
  case F_ZERO_NO_TRIM:
    if (punch_unsupported && o->files == NULL)
      model_unpunched (offset, offset + count);
    r = blk_zero (blk, &base, count, offset, op == F_ZERO_TRIM, &err);
    for (x = 0; x < count; ++x)
      model_set (offset + x, 0, r == 0);
    if (r == 0 && op == F_ZERO_TRIM)
      model_discard (offset, offset + count);
    break;
  case F_TRIM:
    if (punch_unsupported && o->files == NULL)
      model_unpunched (offset, offset + count);
    r = blk_trim (blk, count, offset, &err);
    if (r == 0)
      model_discard (offset, offset + count);
    break;
  case F_COPY_UP:
    r = blk_copy_up (blk, &base, count, offset, &err);
    break;
  case F_FLUSH:
    /* Faults off: a flush that fails leaves what is durable between
     * the last flush and now, which the model does not follow.
     */
    fail_overlay_write_at = 0;
    punch_unsupported = false;
    r = blk_flush (blk, &err);
    if (r == 0 && !cut_taken)
      model_flushed ();
    break;
  case F_CRASH:
  case F_REOPEN:
    fail_overlay_write_at = fail_overlay_read_at = 0;
    punch_unsupported = false;
    /* An odd fault byte arms a power cut instead, at one of the next
     * 8 syncs, the rest of it and offset and count saying what it
     * keeps (power_image).
     */
    if (o->files == NULL && op == F_CRASH && (fault & 1)) {
      cut_in = 1 + (fault >> 1) % 8;
      cut_seed = (uint32_t) (fault | offset << 8 | (uint64_t) count << 20) | 1;
      break;
    }
    if (o->files == NULL) {
      (op == F_CRASH ? overlay_crash : overlay_reopen) (o);
      view_live = false;        /* a view ends with the server */
    }
    break;
  case F_VIEW_CREATE:
    /* Faults off: a kept overlay's checkpoint is flushed with it. */
    if (view_live)
      break;
    fail_overlay_write_at = 0;
    punch_unsupported = false;
    r = blk_view_create (blk, "v");
    if (r == -1 && errno == EEXIST && blk_checkpoint_delete (blk, "v") == 0)
      r = blk_view_create (blk, "v");
    if (r == -1)
      abort ();                 /* no fault reaches it */
    if (o->files == NULL && !cut_taken)
      model_flushed ();
    view_made ();
    break;
  case F_VIEW_READ:
    if (!view_live)
      break;
    r = blk_view_read (blk, &base, "v", buf, count, offset, &err);
    if (r == 0)
      check_view (blk, buf, offset, count);
    else if (err == EIO && view_broken (blk))
      r = 0;                    /* a write that found no room broke it */
    break;
  case F_VIEW_DELETE:
    /* A kept overlay's is flushed before what only the view kept is
     * punched: faults off, as for a flush.
     */
    if (!view_live)
      break;
    fail_overlay_write_at = 0;
    punch_unsupported = false;
    if (blk_view_delete (blk, "v") == -1)
      abort ();
    if (o->files == NULL && !cut_taken)
      model_flushed ();
    view_live = false;
    break;
  case NR_FUZZ_OPS:
    abort ();
  }
  if (r == -1 && (err == 0 || !injected)) {
    /* A failure must carry an errno and be caused. */
    fprintf (stderr, "fuzz-blk: operation %u (%d) failed, errno %d, %s\n",
             i, op, err, injected ? "a fault injected" : "no fault");
    abort ();
  }
  fail_base_read_at = fail_overlay_read_at = fail_overlay_write_at = 0;
  punch_unsupported = false;
  /* The power cut that struck the request. */
  if (cut_taken) {
    overlay_crash (o);
    view_live = false;
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static uint8_t buf[MAX_DISK];
  struct input in = { .p = data, .n = size };
  const char *tmpdir = getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp";
  struct overlay o = { .files = NULL };
  struct blk *other = NULL;
  uint64_t x, geometry;
  unsigned i;

  geometry = take (&in, 1);
  block_size = UINT64_C (4096) << (geometry % 5);          /* 4K .. 64K */
  o.stripes = 1 + geometry / 5 % 3;                         /* 1 .. 3 */
  disk_size = 1 + take (&in, 3) % MAX_DISK;
  for (x = 0; x < disk_size; ++x) {
    value[x] = base_byte (x);
    certainty[x] = EXACT;
  }
  model_flushed ();

  /* 0x40: a kept overlay, in a new file.  Else 0x80: another
   * throw-away overlay holds every other slot of the files, taken in
   * the reverse order of its chunks, so that this one's chunks land in
   * slots between them, out of order; it ends after this one's last
   * read.
   */
  if (geometry & 0x40) {
    snprintf (o.path, sizeof o.path, "%s/fuzz-blk-%d.cow", tmpdir,
              (int) getpid ());
    unlink (o.path);
  }
  else {
    o.files = temp_files_new (tmpdir, o.stripes,
                              stripes_chunk_shift (__builtin_ctz (block_size)));
    if (o.files == NULL)
      abort ();
    if (geometry & 0x80)
      other = interleaved_overlay (&o);
  }
  overlay_open (&o);
  for (i = 0; i < MAX_OPS && in.n > 0; ++i) {
    run_op (&o, i, &in, buf);
    check_states (o.blk);
  }
  /* Faults off: the whole disk must read as the model says. */
  if (blk_read (o.blk, &base, buf, disk_size, 0, BLK_READ_ONLY,
                &(int) { 0 }) == -1)
    abort ();
  check_read (buf, 0, disk_size);
  if (view_live && !view_broken (o.blk)) {
    if (blk_view_read (o.blk, &base, "v", buf, disk_size, 0,
                       &(int) { 0 }) == -1)
      abort ();
    check_view (o.blk, buf, 0, disk_size);
  }
  view_live = false;
  cut_in = 0;
  blk_free (o.blk);
  if (other)
    blk_free (other);
  if (o.files)
    temp_files_free (o.files);
  else {
    unlink (o.path);
    unlink (synced_path);
    unlink (cut_path);
    forget_unsynced ();
    kept_path = NULL;
  }
  cut_taken = false;
  return 0;
}
