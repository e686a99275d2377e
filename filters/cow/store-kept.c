/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The kept store (store.h, cow-file=PATH): one file in the kept format
 * (kept/kept.h, docs/overlay-format.md), opened, started, flushed and
 * closed in the order that format makes crash-safe, each failure
 * reported by nbdkit_error naming the file.  Its writes are cut into
 * stripes like a throw-away store's, each with its write lock, all
 * writing the one file: the locks, not the files, were what one
 * stripe cost.
 *
 * A packed file (format version 3) keeps block b in a slot, at
 * data_offset + slot * block size: a block written for the first time
 * takes the lowest free slot, a block punched whole gives its slot up
 * (retired: not taken again while the file stays open, so a read
 * racing the punch never finds another block's data).  Reads find a
 * block with no slot (one punched meanwhile) as zeros.  The file is
 * extended ahead of its slots, sparsely, GROW_BYTES at a time.  Files
 * of versions 1 and 2 keep block b at data_offset + b * block size.
 * Each layout has its own table of operations.
 *
 * slot_lock is held over every change of the slots (taking, retiring)
 * and the file's growth; a block's slot changes only under its
 * stripe's write lock as well, and lookups take no lock.  flush_lock,
 * in the block layer, lets one flush run at a time; it copies the
 * state pages dirtied since the last one under state_lock.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "divround.h"
#include "fullio.h"
#include "ispowerof2.h"
#include "kept.h"
#include "punch.h"
#include "store.h"
#include "storeio.h"

/* A packed file is extended this far ahead of its slots at a time,
 * sparsely: a write that changes the file's length cost a quarter of
 * the 4K random writes into new blocks (docs/performance.md).
 */
#define GROW_BYTES (64 * 1024 * 1024)

struct store_kept {
  struct store store;
  struct kept_overlay kept;
  /* The configuration, for the header of a new file. */
  uint32_t block_size;
  unsigned block_shift;
  char *name;                   /* the export's */
  struct store_states *states;  /* the block layer's */
  bool started;
  uint64_t data_offset;         /* where slot 0 (or block 0) is */
  /* Pages of the state area changed since they were last written, one
   * entry per page, 1 if dirty.  Under state_lock.
   */
  struct statemap dirty_pages;
  /* Packed: slots the file's length spans, and the lock of slot
   * changes and of the file's growth.
   */
  uint64_t sized_slots;
  pthread_mutex_t slot_lock;
};

static struct store_kept *
kept_of (struct store *st)
{
  return (struct store_kept *) st;
}

static int
fd_of (struct store *st)
{
  return kept_of (st)->kept.fd;
}

/* Reports the failure of a call of the kept library. */
static void
report (const struct store_kept *k)
{
  nbdkit_error ("cow-file=%s", k->kept.why);
}

/*----------------------------------------------------------------------
 * Start: a new file's header, or an existing file's states loaded and
 * what a crash left punched.
 */

static int
create (struct store_kept *k, uint64_t size)
{
  if (kept_create (&k->kept, k->block_size, size, k->name) == -1) {
    report (k);
    return -1;
  }
  return 0;
}

/* Checks an existing file's length and loads its states (and slots),
 * which need only its header: store_kept_open does it before any base
 * is known, so that a damaged file stops nbdkit before it serves.
 */
static int
load_states (struct store_kept *k)
{
  struct kept_overlay *ko = &k->kept;

  if (kept_check_length (ko) == -1 ||
      kept_load_states (ko, k->states->map, NULL) == -1) {
    report (k);
    return -1;
  }
  return 0;
}

/* Starts an existing file, its states loaded, for a base of size
 * bytes.  The sync of the header's flag makes the states loaded
 * durable before any write can take a slot they leave free
 * (docs/overlay-format.md).
 */
static int
load (struct store_kept *k, uint64_t size)
{
  struct kept_overlay *ko = &k->kept;
  const struct kept_header *h = &ko->header;
  bool crashed = (h->flags & KEPT_OPEN) != 0;

  if (h->layout.base_size != size) {
    nbdkit_error ("cow-file=%s: made for a base of %" PRIu64 " bytes, "
                  "this base has %" PRIu64, ko->path, h->layout.base_size,
                  size);
    return -1;
  }
  kept_punch_unallocated (ko, k->states->map);
  if (crashed)
    nbdkit_debug ("cow-file=%s: not closed cleanly: it holds what was "
                  "flushed before", ko->path);
  if (kept_set_flags (ko, KEPT_OPEN, h->recoveries + crashed) == -1) {
    report (k);
    return -1;
  }
  return 0;
}

/* From here on the file is marked open, until a clean close. */
static int
kept_start (struct store *st, uint64_t size)
{
  struct store_kept *k = kept_of (st);
  const struct kept_layout *l = &k->kept.header.layout;
  struct stat st_file;

  if ((k->kept.has_header ? load (k, size) : create (k, size)) == -1)
    return -1;
  k->data_offset = l->data_offset;
  st->overhead = l->data_offset;
  if (l->packed && fstat (k->kept.fd, &st_file) == 0 &&
      (uint64_t) st_file.st_size > l->data_offset)
    k->sized_slots = ((uint64_t) st_file.st_size - l->data_offset)
                     >> k->block_shift;
  k->started = true;
  return 0;
}

/*----------------------------------------------------------------------
 * Data of a file of versions 1 and 2: block b at its own offset.
 */

static int
identity_read (struct store *st, void *buf, uint64_t count, uint64_t offset,
               int *err)
{
  if (pread_full (fd_of (st), buf, count, kept_of (st)->data_offset + offset)
      == -1) {
    storeio_report ("read", count, offset, err);
    return -1;
  }
  return 0;
}

static int
identity_write_locked (struct store *st, const void *buf, uint64_t count,
                       uint64_t offset, int *err)
{
  if (storeio_write (fd_of (st), buf, count,
                     kept_of (st)->data_offset + offset) == -1) {
    storeio_report (buf ? "write" : "write of zeros", count, offset, err);
    return -1;
  }
  return 0;
}

static int
identity_punch (struct store *st, uint64_t count, uint64_t offset,
                uint64_t *waited)
{
  int r;

  *waited += stripes_lock (&st->stripes, offset, count);
  r = punch_hole (fd_of (st), kept_of (st)->data_offset + offset, count);
  stripes_unlock (&st->stripes, offset, count);
  return r;
}

/*----------------------------------------------------------------------
 * Data of a packed file: block b in its slot.
 */

static uint64_t
block_end (const struct store_kept *k, uint64_t offset, uint64_t end)
{
  uint64_t next = ((offset >> k->block_shift) + 1) << k->block_shift;

  return next < end ? next : end;
}

/* The end of the piece of [offset, end) from offset on whose blocks
 * lie one after another in the file, and in *at the file offset of its
 * first byte.  Returns the end of offset's block with *found false if
 * that block has no slot.
 */
static uint64_t
slot_run (const struct store_kept *k, uint64_t offset, uint64_t end,
          bool *found, uint64_t *at)
{
  const struct kept_slots *slots = &k->kept.slots;
  uint64_t b = offset >> k->block_shift, slot, next;
  uint64_t stop = block_end (k, offset, end);

  *found = kept_slots_get (slots, b, &slot);
  if (!*found)
    return stop;
  *at = k->data_offset + (slot << k->block_shift)
        + (offset - (b << k->block_shift));
  while (stop < end && kept_slots_get (slots, ++b, &next) && next == ++slot)
    stop = block_end (k, stop, end);
  return stop;
}

static int
packed_read (struct store *st, void *buf, uint64_t count, uint64_t offset,
             int *err)
{
  struct store_kept *k = kept_of (st);
  uint64_t end = offset + count, pos = offset, stop, at;
  char *p = buf;
  bool found;

  for (; pos < end; p += stop - pos, pos = stop) {
    stop = slot_run (k, pos, end, &found, &at);
    if (!found)
      memset (p, 0, stop - pos);
    else if (pread_full (k->kept.fd, p, stop - pos, at) == -1) {
      storeio_report ("read", count, offset, err);
      return -1;
    }
  }
  return 0;
}

/* Extends the file, sparsely, past its last slot taken, so that the
 * writes of the next GROW_BYTES of new slots leave its length alone.
 * Best effort: a write past the end extends the file anyway.  The
 * length only grows, to past every slot taken, so it never cuts off a
 * write of another stripe.  Requires slot_lock.
 */
static void
grow_ahead (struct store_kept *k)
{
  uint64_t step = GROW_BYTES >> k->block_shift, sized;
  uint64_t end = kept_slots_end (&k->kept.slots);

  if (end <= k->sized_slots)
    return;
  if (step == 0)
    step = 1;
  sized = div_round_up (end, step) * step;
  if (ftruncate (k->kept.fd, k->data_offset + (sized << k->block_shift)) == 0)
    k->sized_slots = sized;
}

/* Gives every block of [offset, end) that has none a slot, in order,
 * so that blocks written together lie together.  Done before any byte
 * is written, so that a write that cannot have its slots fails having
 * written nothing.  Requires the write locks of the range (so no other
 * thread changes these blocks' slots) and takes slot_lock only if a
 * block has no slot.
 */
static int
take_slots (struct store_kept *k, uint64_t offset, uint64_t end)
{
  struct kept_slots *slots = &k->kept.slots;
  uint64_t b = offset >> k->block_shift, last = (end - 1) >> k->block_shift;
  uint64_t slot;
  int r = 0;

  while (b <= last && kept_slots_get (slots, b, &slot))
    ++b;
  if (b > last)
    return 0;
  pthread_mutex_lock (&k->slot_lock);
  for (; b <= last && r == 0; ++b)
    if (!kept_slots_get (slots, b, &slot))
      r = kept_slots_take (slots, b, &slot);
  if (r == 0)
    grow_ahead (k);
  pthread_mutex_unlock (&k->slot_lock);
  return r;
}

static int
packed_write_locked (struct store *st, const void *buf, uint64_t count,
                     uint64_t offset, int *err)
{
  struct store_kept *k = kept_of (st);
  uint64_t end = offset + count, pos = offset, stop, at;
  const char *p = buf;
  bool found;

  if (take_slots (k, offset, end) == -1)
    goto fail;
  for (; pos < end; pos = stop) {
    stop = slot_run (k, pos, end, &found, &at);
    if (storeio_write (k->kept.fd, p, stop - pos, at) == -1)
      goto fail;
    if (p)
      p += stop - pos;
  }
  return 0;
 fail:
  storeio_report (buf ? "write" : "write of zeros", count, offset, err);
  return -1;
}

/* Punches the slots of the blocks of [offset, end), a run of slots at
 * a time, and retires them.  Requires the write locks of the range.
 */
static int
punch_slots (struct store_kept *k, uint64_t offset, uint64_t end)
{
  uint64_t at, stop, b, block_size = UINT64_C (1) << k->block_shift;
  int r = 0, saved_errno = 0;
  bool found;

  for (; offset < end; offset = stop) {
    stop = slot_run (k, offset, end, &found, &at);
    if (!found)
      continue;
    /* Whole slots: the disk's short last block has a whole one too. */
    if (punch_hole (k->kept.fd, at,
                    div_round_up (stop - offset, block_size) * block_size)
        == -1) {
      r = -1;
      saved_errno = errno;
    }
    pthread_mutex_lock (&k->slot_lock);
    for (b = offset >> k->block_shift; b << k->block_shift < stop; ++b)
      kept_slots_retire (&k->kept.slots, b);
    pthread_mutex_unlock (&k->slot_lock);
  }
  errno = saved_errno;
  return r;
}

/* The one file is punched under the write locks of every stripe in the
 * range together, since the range holds their chunks.
 */
static int
packed_punch (struct store *st, uint64_t count, uint64_t offset,
              uint64_t *waited)
{
  int r;

  *waited += stripes_lock (&st->stripes, offset, count);
  r = punch_slots (kept_of (st), offset, offset + count);
  stripes_unlock (&st->stripes, offset, count);
  return r;
}

/*----------------------------------------------------------------------
 * The dirty state pages and the flush (docs/overlay-format.md says why
 * its order is crash-safe without a journal).
 */

/* The state pages holding blocks [first, first+n): their entries in
 * dirty_pages are [*page, *page + *pages).
 */
static void
state_pages_of (const struct store_kept *k, uint64_t first, uint64_t n,
                uint64_t *page, uint64_t *pages)
{
  uint64_t per_page = k->kept.header.layout.blocks_per_page;

  *page = first / per_page;
  *pages = (first + n - 1) / per_page - *page + 1;
}

static int
kept_reserve_states (struct store *st, uint64_t first, uint64_t n)
{
  uint64_t page, pages;

  state_pages_of (kept_of (st), first, n, &page, &pages);
  return statemap_reserve (&kept_of (st)->dirty_pages, page, pages);
}

static void
kept_states_changed (struct store *st, uint64_t first, uint64_t n)
{
  uint64_t page, pages;

  state_pages_of (kept_of (st), first, n, &page, &pages);
  statemap_set (&kept_of (st)->dirty_pages, page, pages, 1);
}

/* The kept_redirty_pages of a flush.  The pages' entries in
 * dirty_pages exist (they were dirty), so this cannot fail.
 */
static void
redirty_pages (void *opaque, const uint64_t *pages, unsigned n)
{
  struct store_kept *k = opaque;
  unsigned i;

  k->states->lock (k->states);
  for (i = 0; i < n; ++i)
    statemap_set (&k->dirty_pages, pages[i], 1, 1);
  k->states->unlock (k->states);
}

/* The kept_take_pages of a flush: copies up to max dirty state pages
 * from page *next on into buf and marks them clean, under state_lock.
 */
static unsigned
take_dirty_pages (void *opaque, uint64_t *next, uint64_t *pages,
                  uint8_t *buf, unsigned max)
{
  struct store_kept *k = opaque;
  uint64_t total = k->kept.header.layout.states_length / KEPT_STATE_PAGE;
  uint64_t p = *next;
  unsigned n = 0;

  k->states->lock (k->states);
  while (p < total && n < max) {
    unsigned dirty;
    uint64_t end = statemap_run (&k->dirty_pages, p, total, &dirty);
    if (!dirty) {
      p = end;
      continue;
    }
    kept_export_page (&k->kept, k->states->map, p,
                      buf + n * KEPT_STATE_PAGE);
    statemap_set (&k->dirty_pages, p, 1, 0);
    pages[n++] = p++;
  }
  k->states->unlock (k->states);
  *next = p;
  return n;
}

static int
kept_store_flush (struct store *st, int *err)
{
  struct store_kept *k = kept_of (st);

  if (!k->started)
    return 0;
  if (kept_flush (&k->kept, take_dirty_pages, redirty_pages, k) == -1) {
    *err = errno;
    report (k);
    return -1;
  }
  return 0;
}

/*----------------------------------------------------------------------
 * The rest of the store's life.
 */

static unsigned
kept_files (struct store *st)
{
  return 1;
}

static uint64_t
kept_bytes (struct store *st)
{
  return storeio_bytes (fd_of (st));
}

static void
free_kept (struct store_kept *k)
{
  kept_close (&k->kept);
  statemap_free (&k->dirty_pages);
  pthread_mutex_destroy (&k->slot_lock);
  stripes_free (&k->store.stripes);
  free (k->name);
  free (k);
}

/* A clean stop: what clients wrote is kept, flushed or not, and the
 * file is marked closed cleanly (and a packed one cut after its last
 * slot), unless the flush failed: then it stays marked open, with the
 * failure noted for nbdcow, and the next start recovers what was
 * flushed before.
 */
static int
kept_store_close (struct store *st)
{
  struct store_kept *k = kept_of (st);
  uint32_t recoveries = k->kept.header.recoveries;
  int err, r = 0;

  if (k->started) {
    if (kept_store_flush (st, &err) == -1) {
      nbdkit_error ("cow-file=%s: the last flush failed: %s: the file holds "
                    "what was flushed before", k->kept.path, strerror (err));
      kept_set_flags (&k->kept, KEPT_OPEN | KEPT_FLUSH_FAILED, recoveries);
      r = -1;
    }
    else if (kept_set_flags (&k->kept, 0, recoveries) == -1) {
      report (k);
      r = -1;
    }
    else
      kept_cut (&k->kept);
  }
  free_kept (k);
  return r;
}

static const struct store_ops packed_ops = {
  .start = kept_start,
  .read = packed_read,
  .write_locked = packed_write_locked,
  .punch = packed_punch,
  .reserve_states = kept_reserve_states,
  .states_changed = kept_states_changed,
  .flush = kept_store_flush,
  .files = kept_files,
  .bytes = kept_bytes,
  .close = kept_store_close,
};

static const struct store_ops identity_ops = {
  .start = kept_start,
  .read = identity_read,
  .write_locked = identity_write_locked,
  .punch = identity_punch,
  .reserve_states = kept_reserve_states,
  .states_changed = kept_states_changed,
  .flush = kept_store_flush,
  .files = kept_files,
  .bytes = kept_bytes,
  .close = kept_store_close,
};

/* The header of an existing file must match the configuration. */
static int
check_header (const struct store_kept *k)
{
  const struct kept_header *h = &k->kept.header;

  if (h->layout.block_size != k->block_size) {
    nbdkit_error ("cow-file=%s: made with cow-block-size=%" PRIu32
                  ", not %" PRIu32, k->kept.path, h->layout.block_size,
                  k->block_size);
    return -1;
  }
  if (strcmp (h->name, k->name) != 0) {
    nbdkit_error ("cow-file=%s: made for export \"%s\", not \"%s\"",
                  k->kept.path, h->name, k->name);
    return -1;
  }
  return 0;
}

/* Whether the file is (or, new, will be) packed. */
static bool
is_packed (const struct kept_overlay *ko)
{
  return ko->has_header ? ko->header.layout.packed
                        : KEPT_VERSION >= KEPT_PACKED_VERSION;
}

struct store *
store_kept_open (const char *path, const char *name, uint32_t block_size,
                 unsigned nr_stripes, struct store_states *states)
{
  struct store_kept *k;

  if (strlen (name) > KEPT_NAME_MAX) {
    nbdkit_error ("cow: export name longer than %d bytes", KEPT_NAME_MAX);
    return NULL;
  }
  k = calloc (1, sizeof *k);
  if (k == NULL || (k->name = strdup (name)) == NULL) {
    nbdkit_error ("cow: %m");
    free (k);
    return NULL;
  }
  k->block_size = block_size;
  k->block_shift = log_2_bits (block_size);
  k->states = states;
  k->dirty_pages = (struct statemap) STATEMAP_INIT;
  k->kept.fd = -1;
  pthread_mutex_init (&k->slot_lock, NULL);
  if (stripes_init (&k->store.stripes, nr_stripes, k->block_shift) == -1) {
    nbdkit_error ("cow: calloc: %m");
    free_kept (k);
    return NULL;
  }
  if (kept_open (&k->kept, path, KEPT_CREATE) == -1) {
    report (k);
    free_kept (k);
    return NULL;
  }
  if (k->kept.has_header &&
      (check_header (k) == -1 || load_states (k) == -1)) {
    free_kept (k);
    return NULL;
  }
  posix_fadvise (k->kept.fd, 0, 0, POSIX_FADV_RANDOM);
  k->store.ops = is_packed (&k->kept) ? &packed_ops : &identity_ops;
  return &k->store;
}
