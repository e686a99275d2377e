/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The overlay's files: open, extend, locks of the stripes, and the
 * system calls that move data (overlayfile.h; docs/design.md, "The
 * overlay").  Data moves with pread and pwrite only, never through a
 * map of the file (docs/performance.md).
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "divround.h"
#include "fullio.h"
#include "keptslots.h"
#include "overlayfile.h"
#include "punch.h"
#include "timedlock.h"

/* Every pwrite into the overlay ends on a multiple of this many bytes
 * of its file (write_pieces).  The kernel sizes the page-cache folios
 * a write creates by the length of the write: one pwrite of 1M makes
 * 1M folios, and on a guest whose free memory the host takes back
 * (docs/performance.md) filling fresh high-order folios
 * ran 10x slower than 128K ones, while overwriting either ran alike.
 */
#define WRITE_PIECE (128 * 1024)

/* A packed file is extended this far ahead of its slots at a time,
 * sparsely: a write that changes the file's length cost a quarter of
 * the 4K random writes into new blocks (docs/performance.md).
 */
#define GROW_BYTES (64 * 1024 * 1024)

/* The source of writes of zeros where the file cannot zero ranges. */
static const char zero_buf[WRITE_PIECE];

/* With one stripe every offset is in chunk 0. */
#define ONE_CHUNK_SHIFT 63

/* Allocates of's stripes with no files yet, or returns -1 after
 * nbdkit_error.
 */
static int
new_stripes (struct overlayfile *of, unsigned nr_stripes,
             unsigned chunk_shift, bool one_file)
{
  unsigned i;

  of->stripes = calloc (nr_stripes, sizeof *of->stripes);
  if (of->stripes == NULL) {
    nbdkit_error ("cow: calloc: %m");
    return -1;
  }
  for (i = 0; i < nr_stripes; ++i) {
    of->stripes[i].fd = -1;
    pthread_mutex_init (&of->stripes[i].write_lock, NULL);
  }
  of->nr_stripes = nr_stripes;
  of->chunk_shift = nr_stripes > 1 ? chunk_shift : ONE_CHUNK_SHIFT;
  of->data_offset = 0;
  of->slots = NULL;
  of->one_file = one_file;
  pthread_mutex_init (&of->slot_lock, NULL);
  return 0;
}

unsigned
overlayfile_files (const struct overlayfile *of)
{
  return of->one_file ? 1 : of->nr_stripes;
}

/* A new temporary file in tmpdir, or -1 after nbdkit_error.  No
 * readahead: the overlay is read where clients ask, and blocks
 * allocated with FALLOC_FL_ZERO_RANGE are unwritten extents whose
 * readahead would only fill zeroed pages nobody asked for.
 */
static int
temp_file (const char *tmpdir)
{
  char *template;
  int fd;

  if (asprintf (&template, "%s/nbdkit-cow-XXXXXX", tmpdir) == -1) {
    nbdkit_error ("cow: asprintf: %m");
    return -1;
  }
  /* mkostemp creates the file 0600; unlinking at once means the overlay
   * vanishes with the process however it ends.
   */
  fd = mkostemp (template, O_CLOEXEC);
  if (fd == -1)
    nbdkit_error ("cow: cannot create the overlay in TMPDIR=%s: %m", tmpdir);
  else {
    unlink (template);
    posix_fadvise (fd, 0, 0, POSIX_FADV_RANDOM);
  }
  free (template);
  return fd;
}

int
overlayfile_new_temp (struct overlayfile *of, const char *tmpdir,
                      unsigned nr_stripes, unsigned chunk_shift)
{
  unsigned i;

  if (new_stripes (of, nr_stripes, chunk_shift, false) == -1)
    return -1;
  for (i = 0; i < nr_stripes; ++i) {
    of->stripes[i].fd = temp_file (tmpdir);
    if (of->stripes[i].fd == -1) {
      overlayfile_close (of);
      return -1;
    }
  }
  return 0;
}

int
overlayfile_new_fd (struct overlayfile *of, int fd, unsigned nr_stripes,
                    unsigned chunk_shift)
{
  unsigned i;

  if (new_stripes (of, nr_stripes, chunk_shift, true) == -1)
    return -1;
  for (i = 0; i < nr_stripes; ++i)
    of->stripes[i].fd = fd;
  posix_fadvise (fd, 0, 0, POSIX_FADV_RANDOM);
  return 0;
}

void
overlayfile_use_slots (struct overlayfile *of, uint64_t data_offset,
                       struct keptslots *slots, unsigned block_shift)
{
  struct stat st;

  of->data_offset = data_offset;
  of->slots = slots;
  of->block_shift = block_shift;
  of->sized_slots = 0;
  if (fstat (of->stripes[0].fd, &st) == 0 &&
      (uint64_t) st.st_size > data_offset)
    of->sized_slots = ((uint64_t) st.st_size - data_offset) >> block_shift;
}

void
overlayfile_close (struct overlayfile *of)
{
  unsigned i;

  for (i = 0; i < of->nr_stripes; ++i) {
    if (!of->one_file && of->stripes[i].fd >= 0)
      close (of->stripes[i].fd);
    pthread_mutex_destroy (&of->stripes[i].write_lock);
  }
  pthread_mutex_destroy (&of->slot_lock);
  free (of->stripes);
  of->stripes = NULL;
  of->nr_stripes = 0;
}

void
overlayfile_extend (struct overlayfile *of, uint64_t size)
{
  unsigned i;

  for (i = 0; i < overlayfile_files (of); ++i)
    if (ftruncate (of->stripes[i].fd, of->data_offset + size) == -1)
      nbdkit_debug ("cow: overlay not sized to %" PRIu64 " bytes: %m", size);
}

/*----------------------------------------------------------------------
 * Stripes and their locks.
 */

static uint64_t
chunk_of (const struct overlayfile *of, uint64_t offset)
{
  return offset >> of->chunk_shift;
}

static unsigned
stripe_of_chunk (const struct overlayfile *of, uint64_t c)
{
  return c % of->nr_stripes;
}

/* The end of the piece of [offset, end) that starts at offset and lies
 * in one chunk.
 */
static uint64_t
piece_end (const struct overlayfile *of, uint64_t offset, uint64_t end)
{
  uint64_t next = (chunk_of (of, offset) + 1) << of->chunk_shift;

  return next < end ? next : end;
}

static int
fd_of (const struct overlayfile *of, uint64_t offset)
{
  return of->stripes[stripe_of_chunk (of, chunk_of (of, offset))].fd;
}

/* The steps from stripe `from` forward to stripe `to`, wrapping
 * around: (to - from) mod nr_stripes, without a division.
 */
static unsigned
stripe_distance (const struct overlayfile *of, unsigned from, unsigned to)
{
  return to >= from ? to - from : to + of->nr_stripes - from;
}

/* The stripes that hold chunks c0 to c1, in the ascending order the
 * lock order wants (docs/design.md): the chunks start in stripe
 * `first` and take the stripes from it on, wrapping around past the
 * last one to [0, wrapped).  So the stripes are [0, wrapped) and then
 * [first, end), with wrapped == first when the chunks cover every
 * stripe, and wrapped == 0 when they do not wrap.
 */
struct stripe_runs {
  unsigned wrapped, first, end;
};

static struct stripe_runs
stripes_of (const struct overlayfile *of, uint64_t c0, uint64_t c1)
{
  uint64_t span = c1 - c0 + 1;
  struct stripe_runs runs = { .first = stripe_of_chunk (of, c0) };

  if (runs.first + span <= of->nr_stripes) {
    runs.end = runs.first + span;
    return runs;
  }
  runs.end = of->nr_stripes;
  runs.wrapped = span >= of->nr_stripes
    ? runs.first : runs.first + span - of->nr_stripes;
  return runs;
}

/* The first of the stripes of runs, and the one after s. */
static unsigned
runs_start (const struct stripe_runs *runs)
{
  return runs->wrapped > 0 ? 0 : runs->first;
}

static unsigned
runs_next (const struct stripe_runs *runs, unsigned s)
{
  return ++s == runs->wrapped ? runs->first : s;
}

static struct stripe_runs
stripes_of_range (const struct overlayfile *of, uint64_t offset,
                  uint64_t count)
{
  return stripes_of (of, chunk_of (of, offset),
                     chunk_of (of, offset + count - 1));
}

uint64_t
overlayfile_lock (struct overlayfile *of, uint64_t offset, uint64_t count)
{
  struct stripe_runs runs = stripes_of_range (of, offset, count);
  uint64_t waited = 0;
  unsigned s;

  for (s = runs_start (&runs); s < runs.end; s = runs_next (&runs, s))
    waited += timed_lock (&of->stripes[s].write_lock);
  return waited;
}

void
overlayfile_unlock (struct overlayfile *of, uint64_t offset, uint64_t count)
{
  struct stripe_runs runs = stripes_of_range (of, offset, count);
  unsigned s;

  for (s = runs_start (&runs); s < runs.end; s = runs_next (&runs, s))
    pthread_mutex_unlock (&of->stripes[s].write_lock);
}

/*----------------------------------------------------------------------
 * Data.
 */

static void
report (const char *what, uint64_t count, uint64_t offset, int *err)
{
  *err = errno;
  if (errno == EFBIG)
    nbdkit_error ("cow: overlay %s of %" PRIu64 " bytes at offset %" PRIu64
                  ": the filesystem of the overlay (in $TMPDIR) cannot hold "
                  "this offset: %m", what, count, offset);
  else
    nbdkit_error ("cow: overlay %s of %" PRIu64 " bytes at offset %" PRIu64
                  ": %m", what, count, offset);
}

/*----------------------------------------------------------------------
 * Slots of a packed overlay.
 */

static uint64_t
block_end (const struct overlayfile *of, uint64_t offset, uint64_t end)
{
  uint64_t next = ((offset >> of->block_shift) + 1) << of->block_shift;

  return next < end ? next : end;
}

/* Packed: the end of the piece of [offset, end) from offset on whose
 * blocks lie one after another in the file, and in *at the file offset
 * of its first byte.  Returns the end of offset's block with *found
 * false if that block has no slot.
 */
static uint64_t
slot_run (const struct overlayfile *of, uint64_t offset, uint64_t end,
          bool *found, uint64_t *at)
{
  uint64_t b = offset >> of->block_shift, slot, next;
  uint64_t stop = block_end (of, offset, end);

  *found = keptslots_get (of->slots, b, &slot);
  if (!*found)
    return stop;
  *at = of->data_offset + (slot << of->block_shift)
        + (offset - (b << of->block_shift));
  while (stop < end && keptslots_get (of->slots, ++b, &next) &&
         next == ++slot)
    stop = block_end (of, stop, end);
  return stop;
}

/* Packed: extends the file, sparsely, past its last slot taken, so
 * that the writes of the next GROW_BYTES of new slots leave its length
 * alone.  Best effort: a write past the end extends the file anyway.
 * The length only grows, to past every slot taken, so it never cuts
 * off a write of another stripe.  Requires slot_lock.
 */
static void
grow_ahead (struct overlayfile *of)
{
  uint64_t step = GROW_BYTES >> of->block_shift, sized;

  if (keptslots_end (of->slots) <= of->sized_slots)
    return;
  if (step == 0)
    step = 1;
  sized = div_round_up (keptslots_end (of->slots), step) * step;
  if (ftruncate (of->stripes[0].fd, of->data_offset
                                    + (sized << of->block_shift)) == 0)
    of->sized_slots = sized;
}

/* Packed: gives every block of [offset, end) that has none a slot, in
 * order, so that blocks written together lie together.  Done before
 * any byte is written, so that a write that cannot have its slots
 * fails having written nothing.  Requires the write locks of the
 * range (so no other thread changes these blocks' slots) and takes
 * slot_lock only if a block has no slot.
 */
static int
take_slots (struct overlayfile *of, uint64_t offset, uint64_t end)
{
  uint64_t b = offset >> of->block_shift, last = (end - 1) >> of->block_shift;
  uint64_t slot;
  int r = 0;

  while (b <= last && keptslots_get (of->slots, b, &slot))
    ++b;
  if (b > last)
    return 0;
  pthread_mutex_lock (&of->slot_lock);
  for (; b <= last && r == 0; ++b)
    if (!keptslots_get (of->slots, b, &slot))
      r = keptslots_take (of->slots, b, &slot);
  if (r == 0)
    grow_ahead (of);
  pthread_mutex_unlock (&of->slot_lock);
  return r;
}

/*----------------------------------------------------------------------
 * Data.
 */

/* The piece of [offset, end) from offset on that one system call
 * moves: the part in one chunk, or packed, one run of slots.  Sets *at
 * to its offset in the file, or *found to false if (packed) its block
 * has no slot.
 */
static uint64_t
next_piece (const struct overlayfile *of, uint64_t offset, uint64_t end,
            bool *found, uint64_t *at)
{
  *found = true;
  *at = of->data_offset + offset;
  if (of->slots)
    return slot_run (of, offset, end, found, at);
  return piece_end (of, offset, end);
}

static int
read_piece (struct overlayfile *of, char *p, uint64_t offset, uint64_t end,
            uint64_t *stop)
{
  bool found;
  uint64_t at;

  *stop = next_piece (of, offset, end, &found, &at);
  if (!found) {
    memset (p, 0, *stop - offset);
    return 0;
  }
  return pread_full (fd_of (of, offset), p, *stop - offset, at);
}

int
overlayfile_read (struct overlayfile *of, void *buf, uint64_t count,
                  uint64_t offset, int *err)
{
  uint64_t end = offset + count, stop;
  char *p = buf;

  while (offset < end) {
    if (read_piece (of, p, offset, end, &stop) == -1) {
      report ("read", count, offset, err);
      return -1;
    }
    p += stop - offset;
    offset = stop;
  }
  return 0;
}

/* pwrite of buf, or zeros if buf is NULL, at file offset at, in pieces
 * that end on multiples of WRITE_PIECE.  Returns 0, or -1 with errno
 * set.
 */
static int
write_pieces (int fd, const char *buf, uint64_t count, uint64_t at)
{
  while (count > 0) {
    uint64_t n = WRITE_PIECE - at % WRITE_PIECE;

    if (n > count)
      n = count;
    if (pwrite_full (fd, buf ? buf : zero_buf, n, at) == -1)
      return -1;
    if (buf)
      buf += n;
    at += n;
    count -= n;
  }
  return 0;
}

/* A piece of a write (next_piece; packed, every block has its slot).
 * Zeros stay allocated: the client did not allow a hole, and later
 * writes into the block should not fail for want of space.
 */
static int
write_piece (struct overlayfile *of, const char *buf, uint64_t offset,
             uint64_t end, uint64_t *stop)
{
  int fd = fd_of (of, offset);
  bool found;
  uint64_t at, count;

  *stop = next_piece (of, offset, end, &found, &at);
  count = *stop - offset;
  if (buf == NULL && fallocate (fd, FALLOC_FL_ZERO_RANGE, at, count) == 0)
    return 0;
  return write_pieces (fd, buf, count, at);
}

int
overlayfile_write_locked (struct overlayfile *of, const void *buf,
                          uint64_t count, uint64_t offset, int *err)
{
  uint64_t end = offset + count, at = offset, stop;
  const char *p = buf;

  if (of->slots && take_slots (of, offset, end) == -1) {
    report (buf ? "write" : "write of zeros", count, offset, err);
    return -1;
  }
  while (at < end) {
    if (write_piece (of, p, at, end, &stop) == -1) {
      report (buf ? "write" : "write of zeros", count, offset, err);
      return -1;
    }
    if (p)
      p += stop - at;
    at = stop;
  }
  return 0;
}

/* Punches [from, to) of stripe s's own file under its write lock. */
static int
punch_stripe (struct overlayfile *of, unsigned s, uint64_t from, uint64_t to,
              uint64_t *waited)
{
  struct overlayfile_stripe *stripe = &of->stripes[s];
  int r;

  *waited += timed_lock (&stripe->write_lock);
  r = punch_hole (stripe->fd, of->data_offset + from, to - from);
  pthread_mutex_unlock (&stripe->write_lock);
  return r;
}

/* Packed: punches the slots of the blocks of [offset, end), a run of
 * slots at a time, and retires them.  Requires the write locks of the
 * range.
 */
static int
punch_slots (struct overlayfile *of, uint64_t offset, uint64_t end)
{
  uint64_t at, stop, b, block_size = UINT64_C (1) << of->block_shift;
  int r = 0, saved_errno = 0;
  bool found;

  for (; offset < end; offset = stop) {
    stop = slot_run (of, offset, end, &found, &at);
    if (!found)
      continue;
    /* Whole slots: the disk's short last block has a whole one too. */
    if (punch_hole (of->stripes[0].fd, at,
                    div_round_up (stop - offset, block_size) * block_size)
        == -1) {
      r = -1;
      saved_errno = errno;
    }
    pthread_mutex_lock (&of->slot_lock);
    for (b = offset >> of->block_shift; b << of->block_shift < stop; ++b)
      keptslots_retire (of->slots, b);
    pthread_mutex_unlock (&of->slot_lock);
  }
  errno = saved_errno;
  return r;
}

/* A kept overlay: its one file is punched once, under the write locks
 * of every stripe in the range, since the range holds their chunks.
 */
static int
punch_one_file (struct overlayfile *of, uint64_t offset, uint64_t end,
                uint64_t *waited)
{
  int r;

  *waited += overlayfile_lock (of, offset, end - offset);
  if (of->slots)
    r = punch_slots (of, offset, end);
  else
    r = punch_hole (of->stripes[0].fd, of->data_offset + offset,
                    end - offset);
  overlayfile_unlock (of, offset, end - offset);
  return r;
}

/* Throw-away, each file is punched once, from the first of its chunks
 * in the range to the last: the other stripes' chunks in between are
 * holes in it already.
 */
static int
punch_stripes (struct overlayfile *of, uint64_t offset, uint64_t end,
               uint64_t *waited)
{
  uint64_t c0 = chunk_of (of, offset), c1 = chunk_of (of, end - 1);
  struct stripe_runs runs = stripes_of (of, c0, c1);
  unsigned s1 = stripe_of_chunk (of, c1), s;
  int r = 0, saved_errno = 0;

  for (s = runs_start (&runs); s < runs.end; s = runs_next (&runs, s)) {
    uint64_t first = c0 + stripe_distance (of, runs.first, s);
    uint64_t last = c1 - stripe_distance (of, s, s1);
    uint64_t from = first == c0 ? offset : first << of->chunk_shift;
    uint64_t to = last == c1 ? end : (last + 1) << of->chunk_shift;

    if (punch_stripe (of, s, from, to, waited) == -1) {
      r = -1;
      saved_errno = errno;
    }
  }
  errno = saved_errno;
  return r;
}

int
overlayfile_punch (struct overlayfile *of, uint64_t count, uint64_t offset,
                   uint64_t *waited)
{
  if (of->one_file)
    return punch_one_file (of, offset, offset + count, waited);
  return punch_stripes (of, offset, offset + count, waited);
}

uint64_t
overlayfile_bytes (struct overlayfile *of)
{
  uint64_t bytes = 0;
  struct stat st;
  unsigned i;

  for (i = 0; i < overlayfile_files (of); ++i)
    if (fstat (of->stripes[i].fd, &st) == 0)
      bytes += (uint64_t) st.st_blocks * 512;
  return bytes;
}
