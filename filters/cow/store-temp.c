/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The throw-away store (store.h): slots of the temporary files that
 * all throw-away overlays of the server share (tempfiles.h), one file
 * per stripe.  Each chunk of the disk gets a slot of its stripe's file
 * when it is first written, and keeps it until the overlay ends:
 * within a chunk offsets map one to one, so a request meets as many
 * pieces as chunks, as with a file per disk, while the files take
 * space as they are written, whatever the size of the disk.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "checks.h"
#include "divround.h"
#include "fullio.h"
#include "lockranks.h"
#include "punch.h"
#include "slotmap.h"
#include "store.h"
#include "storeio.h"
#include "tempfiles.h"

struct store_temp {
  struct store store;
  struct temp_files *files;
  bool started;
  /* The slot of each chunk's place in its stripe's file, plus 1 (0:
   * none yet), at slots entry place * chunks + chunk (store.h: place
   * 1 only from a view on); set once, when the chunk's place is first
   * written, under the chunk's write lock and slot_lock, which
   * serializes the map's growth; given back when the store closes.
   * Read without a lock: a slot is set before any block of it is said
   * to be allocated there (under state_lock), and never changes while
   * the overlay lives.
   */
  mutex_t slot_lock;
  uint64_t chunks;
  struct slotmap slots FIELD_GUARDED_BY (slot_lock);
};

static struct store_temp *
temp_of (struct store *st)
{
  return (struct store_temp *) st;
}

/* log2 of a chunk's bytes, the stripes' (stripes.h): a slot's. */
static unsigned
chunk_shift (const struct store_temp *t)
{
  return t->store.stripes->chunk_shift;
}

static int
temp_start (struct store *st, uint64_t size, uint64_t *overhead)
{
  struct store_temp *t = temp_of (st);
  uint64_t chunk_bytes = UINT64_C (1) << chunk_shift (t);

  *overhead = 0;
  t->chunks = div_round_up (size, chunk_bytes);
  if (slotmap_init (&t->slots, 2 * t->chunks) == -1) {
    nbdkit_error ("cow: the map of the overlay's chunks: %m");
    return -1;
  }
  t->started = true;
  return 0;
}

/* The bytes of [at, end) that lie in at's chunk. */
static inline uint64_t
piece_length (const struct store_temp *t, uint64_t at, uint64_t end)
{
  unsigned shift = chunk_shift (t);
  uint64_t next = ((at >> shift) + 1) << shift;

  return (next < end ? next : end) - at;
}

/* The stripe of a chunk, whose file holds the chunk's slot. */
static inline unsigned
stripe_of (const struct store_temp *t, uint64_t chunk)
{
  return chunk % t->files->nr;
}

static inline int
fd_of (const struct store_temp *t, uint64_t chunk)
{
  return t->files->files[stripe_of (t, chunk)].fd;
}

/* The entry of slots that holds the slot of chunk's place. */
static inline uint64_t
entry_of (const struct store_temp *t, uint64_t chunk, unsigned place)
{
  return place * t->chunks + chunk;
}

/* Where byte at lies in its chunk's file, the chunk's slot plus 1
 * being slot.
 */
static inline uint64_t
file_offset (const struct store_temp *t, uint64_t slot, uint64_t at)
{
  unsigned shift = chunk_shift (t);

  return ((slot - 1) << shift) + (at & ((UINT64_C (1) << shift) - 1));
}

static int
temp_read (struct store *st, void *buf, uint64_t count, uint64_t offset,
           unsigned place, int *err)
{
  struct store_temp *t = temp_of (st);
  uint64_t end = offset + count, at, length;
  char *p = buf;

  for (at = offset; at < end; at += length, p += length) {
    uint64_t chunk = at >> chunk_shift (t);
    uint64_t slot = slotmap_get (&t->slots, entry_of (t, chunk, place));

    length = piece_length (t, at, end);
    /* A chunk never written holds no allocated block: only a read that
     * raced a discard of its blocks may land here.
     */
    if (slot == 0)
      memset (p, 0, length);
    else if (pread_full (fd_of (t, chunk), p, length,
                         file_offset (t, slot, at)) == -1) {
      storeio_report ("read", count, offset, err);
      return -1;
    }
  }
  return 0;
}

/* The chunks whose slots a chunk's first write takes at once when the
 * chunk before it in its stripe has one: a client writing in order
 * takes them for the next chunks of the stripe too, with one lock and
 * one search of the file's slots for RUN_SLOTS chunks, and where the
 * file has them free, in a row, so that the file too is written in
 * order.
 */
#define RUN_SLOTS 8

/* How many chunks from chunk on, one stripe apart, take slots for
 * place with it: chunk alone, or when the chunk before it in its
 * stripe has one there, up to RUN_SLOTS of them that have none.
 * Requires the stripe's write lock, under which their slots are set.
 */
static unsigned
run_of (const struct store_temp *t, uint64_t chunk, unsigned place)
{
  uint64_t nr = t->files->nr, e = entry_of (t, chunk, place);
  unsigned n = 1;

  if (chunk < nr || slotmap_get (&t->slots, e - nr) == 0)
    return 1;
  while (n < RUN_SLOTS && chunk + n * nr < t->chunks &&
         slotmap_get (&t->slots, e + n * nr) == 0)
    n++;
  return n;
}

/* Gives chunk's place, which has none, a slot of its stripe's file,
 * and the chunks of run_of after it theirs where the file has them.
 * Returns the slot plus 1, or 0 with errno set.
 */
static uint64_t __attribute__ ((noinline))
take_slot (struct store *st, uint64_t chunk, unsigned place)
  REQUIRES (*st->stripes)
{
  struct store_temp *t = temp_of (st);
  uint64_t nr = t->files->nr, e = entry_of (t, chunk, place), slot;
  uint64_t first = 0;
  unsigned n = run_of (t, chunk, place);
  int taken, k;

  held_lock (&t->slot_lock);
  if (slotmap_reserve (&t->slots, e, (n - 1) * nr + 1) == 0 &&
      (taken = temp_files_take (t->files, stripe_of (t, chunk), n,
                                &slot)) > 0) {
    for (k = 0; k < taken; ++k)
      slotmap_set (&t->slots, e + k * nr, slot + k + 1);
    first = slot + 1;
  }
  held_unlock (&t->slot_lock);
  return first;
}

static int
temp_write (struct store *st, const void *buf, uint64_t count,
            uint64_t offset, unsigned place, int *err) REQUIRES (*st->stripes)
{
  struct store_temp *t = temp_of (st);
  uint64_t end = offset + count, at, length;
  const char *p = buf;

  CHECK (stripes_held (st->stripes, offset, count));
  for (at = offset; at < end; at += length) {
    uint64_t chunk = at >> chunk_shift (t);
    uint64_t slot = slotmap_get (&t->slots, entry_of (t, chunk, place));

    length = piece_length (t, at, end);
    if (slot == 0 && (slot = take_slot (st, chunk, place)) == 0) {
      *err = errno;
      nbdkit_error ("cow: the overlay files in TMPDIR=%s cannot take %"
                    PRIu64 " more bytes: %m", t->files->tmpdir,
                    UINT64_C (1) << chunk_shift (t));
      return -1;
    }
    if (storeio_write (fd_of (t, chunk), p, length,
                       file_offset (t, slot, at)) == -1) {
      storeio_report (buf ? "write" : "write of zeros", count, offset, err);
      return -1;
    }
    if (p)
      p += length;
  }
  return 0;
}

/* The span of each file a punch has met and not punched yet, so that
 * the slots of consecutive chunks of one stripe are punched at once.
 */
struct punch {
  struct store_temp *t;
  uint64_t from[BLK_MAX_STRIPES], to[BLK_MAX_STRIPES];
  int err;                      /* errno of the last that failed */
};

static void
punch_flush (struct punch *punch, unsigned i)
{
  if (punch->to[i] > punch->from[i] &&
      punch_hole (punch->t->files->files[i].fd, punch->from[i],
                  punch->to[i] - punch->from[i]) == -1)
    punch->err = errno;
  punch->from[i] = punch->to[i] = 0;
}

static int
temp_punch (struct store *st, uint64_t count, uint64_t offset,
            unsigned place) REQUIRES (*st->stripes)
{
  struct store_temp *t = temp_of (st);
  struct punch punch = { .t = t };
  uint64_t end = offset + count, at, length;
  unsigned i;

  CHECK (stripes_held (st->stripes, offset, count));
  for (at = offset; at < end; at += length) {
    uint64_t chunk = at >> chunk_shift (t);
    uint64_t slot = slotmap_get (&t->slots, entry_of (t, chunk, place));
    unsigned file = stripe_of (t, chunk);

    length = piece_length (t, at, end);
    if (slot != 0) {
      uint64_t from = file_offset (t, slot, at);

      if (punch.to[file] != from)
        punch_flush (&punch, file);
      if (punch.to[file] == 0)
        punch.from[file] = from;
      punch.to[file] = from + length;
    }
  }
  for (i = 0; i < t->files->nr; ++i)
    punch_flush (&punch, i);
  errno = punch.err;
  return punch.err ? -1 : 0;
}

/* The files are the server's, the space in them each overlay's own. */
static unsigned
temp_files (struct store *st)
{
  return temp_files_count (temp_of (st)->files);
}

static uint64_t
temp_bytes (struct store *st, uint64_t data_bytes)
{
  (void) st;
  return data_bytes;
}

static int
give_back (uint64_t entry, uint32_t slot, void *opaque)
{
  struct store_temp *t = opaque;

  temp_files_give_back (t->files, stripe_of (t, entry % t->chunks), slot - 1);
  return 0;
}

/* Every slot the overlay took is given back to the files, punched. */
static int
temp_close (struct store *st)
{
  struct store_temp *t = temp_of (st);

  if (t->started) {
    slotmap_each (&t->slots, give_back, t);
    temp_files_cut (t->files);
    slotmap_free (&t->slots);
  }
  held_destroy (&t->slot_lock);
  free (t);
  return 0;
}

static const struct store_ops temp_ops = {
  .start = temp_start,
  .read = temp_read,
  .write = temp_write,
  .punch = temp_punch,
  .files = temp_files,
  .bytes = temp_bytes,
  .close = temp_close,
};

struct store *
store_temp_new (struct temp_files *files, const struct stripes *stripes)
{
  struct store_temp *t = calloc (1, sizeof *t);

  CHECK (stripes->nr == files->nr);
  CHECK (stripes->chunk_shift == files->chunk_shift);
  if (t == NULL) {
    nbdkit_error ("cow: calloc: %m");
    return NULL;
  }
  t->store.ops = &temp_ops;
  t->store.stripes = stripes;
  t->files = files;
  held_init (&t->slot_lock, LOCK_RANK_SLOT);
  return &t->store;
}
