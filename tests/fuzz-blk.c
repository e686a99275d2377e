/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* A libFuzzer target: differential fuzzing of the block layer
 * (filters/cow/blk.c) against a plain byte-array model.
 *
 * Each input is a geometry (block size and stripes, whether the
 * overlay's region of the files comes after another's, disk size;
 * built with stripes of one block, so requests cross them) followed by a
 * sequence of operations: reads (plain and cow-on-read), writes, zeroes
 * with and without trim, trims and copy-ups at any offset and length,
 * each optionally with a fault: the n-th base read fails, the n-th
 * overlay read or write fails, or hole punching is unsupported.  The
 * base is an in-memory pattern with holes (see chunk_of); the overlay
 * is a real file.
 *
 * The model holds, for each byte, its value and, after a failed
 * request, the one other value it may have (a failed write leaves each
 * byte old or new, never anything else: no block is marked allocated
 * without its data).  Every read, and every extent the layer reports as
 * zero, is checked against it; a mismatch aborts, which libFuzzer
 * reports with the input that caused it.
 *
 * Build: clang -fsanitize=fuzzer,address,undefined with
 * -Wl,--wrap=pread_full,--wrap=pwrite_full,--wrap=fallocate (see
 * Makefile.am).  Faults come through the wrapped calls, so the real
 * overlay code runs.
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
#include <unistd.h>

#include "blk.h"
#include "fullio.h"
#include "space.h"
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

static bool
trips (unsigned *at)
{
  return *at != 0 && --*at == 0;
}

int __real_pread_full (int fd, void *buf, size_t count, off_t offset);
int __real_pwrite_full (int fd, const void *buf, size_t count, off_t offset);
int __real_fallocate (int fd, int mode, off_t offset, off_t len);

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
    if (count > 1)
      __real_pwrite_full (fd, buf, count / 2, offset);
    errno = ENOSPC;
    return -1;
  }
  return __real_pwrite_full (fd, buf, count, offset);
}

int
__wrap_fallocate (int fd, int mode, off_t offset, off_t len)
{
  if (punch_unsupported) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return __real_fallocate (fd, mode, offset, len);
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

/* Byte x was set to v by a request that succeeded (ok) or failed. */
static void
model_set (uint64_t x, uint8_t v, bool ok)
{
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
 * show.
 */
static void
check_states (struct blk *blk)
{
  uint64_t offset = 0, blocks[3] = { 0, 0, 0 };
  struct blk_stats stats;

  while (offset < disk_size) {
    enum blk_state state;
    uint64_t end = blk_state_run (blk, offset, disk_size, &state);

    if (end <= offset)
      abort ();
    blocks[state] += (end + block_size - 1) / block_size - offset / block_size;
    if (state == BLK_ZERO)
      for (; offset < end; ++offset)
        if (!model_allows (offset, 0)) {
          fprintf (stderr, "fuzz-blk: byte %" PRIu64 " in a zero extent\n",
                   offset);
          abort ();
        }
    offset = end;
  }
  blk_get_stats (blk, &stats);
  if (memcmp (blocks, stats.blocks, sizeof blocks) != 0) {
    fprintf (stderr, "fuzz-blk: statistics count blocks %" PRIu64 "/%" PRIu64
             "/%" PRIu64 ", runs show %" PRIu64 "/%" PRIu64 "/%" PRIu64 "\n",
             stats.blocks[0], stats.blocks[1], stats.blocks[2],
             blocks[0], blocks[1], blocks[2]);
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
  NR_FUZZ_OPS
};

/* Whole blocks of [offset, end): what a trim zeroes. */
static void
model_trim (uint64_t offset, uint64_t end)
{
  uint64_t b = (offset + block_size - 1) / block_size * block_size;

  for (; b < end; b += block_size) {
    uint64_t stop = b + block_size < disk_size ? b + block_size : disk_size;
    uint64_t x;
    if (stop > end)
      break;
    for (x = b; x < stop; ++x)
      model_set (x, 0, true);
  }
}

static void
run_op (struct blk *blk, unsigned i, struct input *in, uint8_t *buf)
{
  enum fuzz_op op = take (in, 1) % NR_FUZZ_OPS;
  uint64_t offset = take (in, 3) % disk_size;
  uint32_t count = 1 + take (in, 3) % (disk_size - offset);
  unsigned fault = take (in, 1);
  uint64_t x;
  int err = 0, r = 0;

  /* The low bits choose a fault, the rest when it strikes. */
  fail_base_read_at = (fault & 3) == 1 ? 1 + (fault >> 2) % 4 : 0;
  fail_overlay_write_at = (fault & 3) == 2 ? 1 + (fault >> 2) % 4 : 0;
  fail_overlay_read_at = (fault & 3) == 3 ? 1 + (fault >> 2) % 4 : 0;
  punch_unsupported = (fault & 0x80) != 0;

  switch (op) {
  case F_READ:
  case F_READ_COW:
    r = blk_read (blk, &base, buf, count, offset, op == F_READ_COW, &err);
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
    r = blk_zero (blk, &base, count, offset, op == F_ZERO_TRIM, &err);
    for (x = 0; x < count; ++x)
      model_set (offset + x, 0, r == 0);
    break;
  case F_TRIM:
    r = blk_trim (blk, count, offset, &err);
    if (r == 0)
      model_trim (offset, offset + count);
    break;
  case F_COPY_UP:
    r = blk_copy_up (blk, &base, count, offset, &err);
    break;
  case NR_FUZZ_OPS:
    abort ();
  }
  if (r == -1 && err == 0)
    abort ();                   /* failures must carry an errno */
  fail_base_read_at = fail_overlay_read_at = fail_overlay_write_at = 0;
  punch_unsupported = false;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static uint8_t buf[MAX_DISK];
  struct input in = { .p = data, .n = size };
  struct temp_files *files;
  const int *skipped_fds;
  uint64_t skipped;
  struct space space;
  struct blk *blk;
  uint64_t x, geometry;
  unsigned i, stripes;

  geometry = take (&in, 1);
  block_size = UINT64_C (4096) << (geometry % 5);          /* 4K .. 64K */
  stripes = 1 + geometry / 5 % 3;                           /* 1 .. 3 */
  disk_size = 1 + take (&in, 3) % MAX_DISK;
  for (x = 0; x < disk_size; ++x) {
    value[x] = base_byte (x);
    certainty[x] = EXACT;
  }

  files = temp_files_new (getenv ("TMPDIR") ? getenv ("TMPDIR") : "/tmp",
                          stripes);
  if (files == NULL)
    abort ();
  /* With the top bit, another overlay's region comes first, so that
   * this one's starts past the files' first byte.
   */
  if (geometry & 0x80 &&
      temp_files_region (files, disk_size, &skipped_fds, &skipped) == -1)
    abort ();
  space_init (&space, SPACECAP_NO_LIMIT);
  blk = blk_new (block_size, files, &space);
  if (blk == NULL || blk_set_size (blk, disk_size) == -1)
    abort ();
  for (i = 0; i < MAX_OPS && in.n > 0; ++i) {
    run_op (blk, i, &in, buf);
    check_states (blk);
  }
  /* Faults off: the whole disk must read as the model says. */
  if (blk_read (blk, &base, buf, disk_size, 0, false, &(int) { 0 }) == -1)
    abort ();
  check_read (buf, 0, disk_size);
  blk_free (blk);
  temp_files_free (files);
  return 0;
}
