/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The block layer: the state of every block and the rules for
 * changing it, for reads, writes, zeroes, trims and copy-ups.
 *
 * docs/design.md holds the state machine, what each lock protects and
 * the lock order, written once; each function here says which locks it
 * expects to hold.  The one rule everything rests on: a block changes
 * state only with its rmw lock held, and BLK_ALLOCATED is final but
 * for a whole-block zero or trim, itself under the lock.  So a write
 * that finds all its blocks allocated goes straight to the overlay
 * with no rmw lock (write_allocated): no copy-up can be running on
 * them.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "basemap.h"
#include "blk.h"
#include "ispowerof2.h"
#include "iszero.h"
#include "rangelock.h"
#include "scratch.h"
#include "shardctr.h"
#include "space.h"
#include "statemap.h"
#include "store.h"
#include "timedlock.h"
#include "wholeblocks.h"

/* Copy-ups read the base in chunks of this many bytes (or one block,
 * if larger), so that one request costs few base calls.
 */
#define COPY_UP_CHUNK (4 * 1024 * 1024)

struct blk {
  /* Fixed by blk_new. */
  unsigned block_shift;
  uint64_t block_size;
  /* The data of allocated blocks (store.h), and the write locks of its
   * stripes, held over every system call that writes it.  The kernel
   * serializes the writes of one file anyway (the inode lock), but its
   * waiters spin, which on few cores starved the threads doing useful
   * work; a mutex waits asleep.  A fast-path write also holds the locks
   * of its range over its state lookup (write_allocated).
   */
  struct store *store;

  /* Fixed by the first blk_set_size, under state_lock, which the
   * connection's .prepare calls before any request can reach us; later
   * calls only compare.  So requests read it without a lock.
   */
  uint64_t size;
  bool size_known;

  /* Protects states; never held over I/O. */
  pthread_mutex_t state_lock;
  struct statemap states;       /* enum blk_state of each block */
  /* The two, as a kept store reads them (struct store_states). */
  struct store_states store_states;

  /* What the base's extents told, under its own lock (basemap.h). */
  struct basemap base_map;

  struct rangelock rmw_locks;   /* state changes and their I/O, by block */

  /* Lets one flush of a kept store run at a time. */
  pthread_mutex_t flush_lock;

  /* The overlay's disk space counted against cow-max-size. */
  struct space space;

  /* Statistics: enum counter, added to without any lock. */
  struct shardctr counters;
};

/*----------------------------------------------------------------------
 * Geometry.
 */

static uint64_t
blk_start (const struct blk *blk, uint64_t b)
{
  return b << blk->block_shift;
}

/* End of block b: the last block of a disk whose size is not a
 * multiple of the block size is short.
 */
static uint64_t
blk_end (const struct blk *blk, uint64_t b)
{
  uint64_t end = (b + 1) << blk->block_shift;
  return end < blk->size ? end : blk->size;
}

static uint64_t
blk_of (const struct blk *blk, uint64_t offset)
{
  return offset >> blk->block_shift;
}

/*----------------------------------------------------------------------
 * Counters and timed locks, for the statistics.  Counting must add no
 * contention to the request path: the counters are sharded by thread
 * (common/shardctr.h), and each lock is tried first, so only a thread
 * that has to wait anyway reads the clock.
 */

enum counter {
  COPY_UPS_READ,                /* blocks, see struct blk_stats */
  COPY_UPS_CACHE,
  COPY_UPS_RMW,
  BASE_READS,
  BASE_READ_BYTES,
  LOCK_WAITS,                   /* one per enum blk_lock from here */
  LOCK_WAIT_NS = LOCK_WAITS + BLK_LOCKS,
  COUNTERS = LOCK_WAIT_NS + BLK_LOCKS
};

static void
stat_add (struct blk *blk, enum counter counter, uint64_t n)
{
  shardctr_add (&blk->counters, counter, n);
}

static void
count_wait (struct blk *blk, enum blk_lock lock, uint64_t ns)
{
  stat_add (blk, LOCK_WAITS + lock, 1);
  stat_add (blk, LOCK_WAIT_NS + lock, ns);
}

static void
lock_mutex (struct blk *blk, pthread_mutex_t *mutex, enum blk_lock lock)
{
  uint64_t waited = timed_lock (mutex);

  if (waited)
    count_wait (blk, lock, waited);
}

static void
lock_rmw (struct blk *blk, struct rangelock_range *held,
          uint64_t first, uint64_t n)
{
  uint64_t waited = rangelock_lock (&blk->rmw_locks, held, first, n);

  if (waited)
    count_wait (blk, BLK_LOCK_RMW, waited);
}

/* Every read of the base goes through here, to be counted. */
static int
base_read (struct blk *blk, const struct blk_base *base, void *buf,
           uint32_t len, uint64_t offset, int *err)
{
  stat_add (blk, BASE_READS, 1);
  stat_add (blk, BASE_READ_BYTES, len);
  return base->pread (base->opaque, buf, len, offset, err);
}

/*----------------------------------------------------------------------
 * The state map.  Each function takes and drops state_lock itself.
 */

static enum blk_state
get_state (struct blk *blk, uint64_t b)
{
  enum blk_state state;

  lock_mutex (blk, &blk->state_lock, BLK_LOCK_STATE);
  state = statemap_get (&blk->states, b);
  pthread_mutex_unlock (&blk->state_lock);
  return state;
}

/* Sets *state to the state of block b and returns the end of its run,
 * at most stop.
 */
static uint64_t
state_run (struct blk *blk, uint64_t b, uint64_t stop, enum blk_state *state)
{
  unsigned s;
  uint64_t end;

  lock_mutex (blk, &blk->state_lock, BLK_LOCK_STATE);
  end = statemap_run (&blk->states, b, stop, &s);
  pthread_mutex_unlock (&blk->state_lock);
  *state = s;
  return end;
}

static bool
all_in_state (struct blk *blk, uint64_t first, uint64_t n,
              enum blk_state state)
{
  enum blk_state s;
  return state_run (blk, first, first + n, &s) == first + n && s == state;
}

/* Makes room in the map before the I/O of a state change, so that the
 * final set_states cannot fail after the data has been written.
 */
static int
reserve_states (struct blk *blk, uint64_t first, uint64_t n, int *err)
{
  int r;

  lock_mutex (blk, &blk->state_lock, BLK_LOCK_STATE);
  r = statemap_reserve (&blk->states, first, n);
  if (r == 0)
    r = store_reserve_states (blk->store, first, n);
  pthread_mutex_unlock (&blk->state_lock);
  if (r == -1) {
    *err = errno;
    nbdkit_error ("cow: cannot grow the block state map: %m");
  }
  return r;
}

/* Requires the rmw locks of the blocks and reserve_states. */
static void
set_states (struct blk *blk, uint64_t first, uint64_t n, enum blk_state state)
{
  lock_mutex (blk, &blk->state_lock, BLK_LOCK_STATE);
  statemap_set (&blk->states, first, n, state);
  store_states_changed (blk->store, first, n);
  pthread_mutex_unlock (&blk->state_lock);
}

/*----------------------------------------------------------------------
 * What blocks are charged against cow-max-size (space.h).
 */

/* The charge of blocks [first, first+n), whatever their state. */
static uint64_t
space_of_blocks (const struct blk *blk, uint64_t first, uint64_t n)
{
  return space_of (blk_end (blk, first + n - 1) - blk_start (blk, first), n);
}

/* The charge of the blocks of [first, first+n) in state want.
 * Requires state_lock.
 */
static uint64_t
space_in_map (struct blk *blk, uint64_t first, uint64_t n,
              enum blk_state want)
{
  uint64_t b = first, stop = first + n, space = 0;

  while (b < stop) {
    unsigned state;
    uint64_t end = statemap_run (&blk->states, b, stop, &state);
    if (state == want)
      space += space_of_blocks (blk, b, end - b);
    b = end;
  }
  return space;
}

/* space_in_map, taking state_lock.  Stable only under the blocks' rmw
 * locks.
 */
static uint64_t
space_in_state (struct blk *blk, uint64_t first, uint64_t n,
                enum blk_state want)
{
  uint64_t space;

  lock_mutex (blk, &blk->state_lock, BLK_LOCK_STATE);
  space = space_in_map (blk, first, n, want);
  pthread_mutex_unlock (&blk->state_lock);
  return space;
}

/* The space blocks [first, first+n) need to become allocated.
 * Requires their rmw locks.
 */
static uint64_t
space_to_allocate (struct blk *blk, uint64_t first, uint64_t n)
{
  return space_of_blocks (blk, first, n)
         - space_in_state (blk, first, n, BLK_ALLOCATED);
}

void
blk_set_max_size (struct blk *blk, uint64_t bytes)
{
  space_set_limit (&blk->space, bytes);
}

/*----------------------------------------------------------------------
 * Overlay I/O (store.h), with the waits for the write locks counted.
 */

static void
lock_file (struct blk *blk, uint64_t count, uint64_t offset)
{
  uint64_t waited = stripes_lock (&blk->store->stripes, offset, count);

  if (waited)
    count_wait (blk, BLK_LOCK_WRITE, waited);
}

static void
unlock_file (struct blk *blk, uint64_t count, uint64_t offset)
{
  stripes_unlock (&blk->store->stripes, offset, count);
}

/* Reads bytes of allocated blocks.  No lock: a block leaves the
 * allocated state only by a zero or trim of it, which a read that
 * overlaps it in time may see or not.
 */
static int
overlay_read (struct blk *blk, void *buf, uint64_t count, uint64_t offset,
              int *err)
{
  return store_read (blk->store, buf, count, offset, err);
}

/* Deallocates a range, which then reads as zeros.  Returns 0, or -1
 * with errno set if the filesystem cannot punch holes.  Takes the
 * write locks.
 */
static int
overlay_punch (struct blk *blk, uint64_t count, uint64_t offset)
{
  uint64_t waited = 0;
  int r = store_punch (blk->store, count, offset, &waited);

  if (waited)
    count_wait (blk, BLK_LOCK_WRITE, waited);
  return r;
}

/* Writes buf, or zeros if buf is NULL, allocating space as it goes.
 * A kill -9 leaves each 4K page of it old or new: write(2) copies page
 * by page and gives way to a fatal signal only between pages, which a
 * kept overlay relies on (docs/overlay-format.md).  Requires the write
 * locks of the range.
 */
static int
overlay_write_locked (struct blk *blk, const void *buf, uint64_t count,
                      uint64_t offset, int *err)
{
  return store_write_locked (blk->store, buf, count, offset, err);
}

static int
overlay_write (struct blk *blk, const void *buf, uint64_t count,
               uint64_t offset, int *err)
{
  int r;

  lock_file (blk, count, offset);
  r = overlay_write_locked (blk, buf, count, offset, err);
  unlock_file (blk, count, offset);
  return r;
}

/*----------------------------------------------------------------------
 * Life cycle.
 */

/* The struct blk whose store_states states is. */
static struct blk *
owner_of (struct store_states *states)
{
  return (struct blk *) ((char *) states - offsetof (struct blk, store_states));
}

/* The store_states of a kept store: state_lock, its waits counted. */
static void
lock_store_states (struct store_states *states)
{
  struct blk *blk = owner_of (states);

  lock_mutex (blk, &blk->state_lock, BLK_LOCK_STATE);
}

static void
unlock_store_states (struct store_states *states)
{
  pthread_mutex_unlock (&owner_of (states)->state_lock);
}

/* A struct blk with no store and no size yet. */
static struct blk *
blk_alloc (uint32_t block_size)
{
  struct blk *blk;

  blk = calloc (1, sizeof *blk);
  if (blk == NULL || shardctr_init (&blk->counters, COUNTERS) == -1) {
    nbdkit_error ("cow: calloc: %m");
    free (blk);
    return NULL;
  }
  blk->block_size = block_size;
  blk->block_shift = log_2_bits (block_size);
  pthread_mutex_init (&blk->state_lock, NULL);
  blk->states = (struct statemap) STATEMAP_INIT;
  blk->store_states = (struct store_states) {
    .map = &blk->states,
    .lock = lock_store_states,
    .unlock = unlock_store_states,
  };
  basemap_init (&blk->base_map, blk->block_shift);
  rangelock_init (&blk->rmw_locks);
  pthread_mutex_init (&blk->flush_lock, NULL);
  space_init (&blk->space);
  return blk;
}

/* blk with its store, or NULL if there is none (freeing blk). */
static struct blk *
with_store (struct blk *blk, struct store *store)
{
  if (store == NULL) {
    blk_free (blk);
    return NULL;
  }
  blk->store = store;
  return blk;
}

struct blk *
blk_new (uint32_t block_size, const char *tmpdir, unsigned stripes)
{
  struct blk *blk = blk_alloc (block_size);

  if (blk == NULL)
    return NULL;
  return with_store (blk, store_temp_new (tmpdir, stripes, blk->block_shift));
}

struct blk *
blk_new_kept (uint32_t block_size, const char *path, const char *name,
              unsigned stripes)
{
  struct blk *blk = blk_alloc (block_size);

  if (blk == NULL)
    return NULL;
  return with_store (blk, store_kept_open (path, name, block_size, stripes,
                                           &blk->store_states));
}

void
blk_free (struct blk *blk)
{
  if (blk == NULL)
    return;
  if (blk->store)
    store_close (blk->store);   /* a kept one flushed first */
  statemap_free (&blk->states);
  basemap_free (&blk->base_map);
  pthread_mutex_destroy (&blk->state_lock);
  pthread_mutex_destroy (&blk->flush_lock);
  rangelock_destroy (&blk->rmw_locks);
  shardctr_free (&blk->counters);
  free (blk);
}

/* Starts the store for a base of size bytes, and charges what it holds
 * (a kept file's header, states and blocks) against cow-max-size.
 * Requires state_lock.
 */
static int
start_store (struct blk *blk, uint64_t size)
{
  if (size == 0)
    return 0;
  if (store_start (blk->store, size) == -1)
    return -1;
  space_charge (&blk->space, blk->store->overhead +
                space_in_map (blk, 0, blk_of (blk, size - 1) + 1,
                              BLK_ALLOCATED));
  return 0;
}

/* The first call does the overlay's setup I/O under state_lock: no
 * request can reach the layer before it returns.
 */
int
blk_set_size (struct blk *blk, uint64_t size)
{
  int r = 0;

  lock_mutex (blk, &blk->state_lock, BLK_LOCK_STATE);
  if (!blk->size_known) {
    blk->size = size;
    basemap_set_size (&blk->base_map, size);
    r = start_store (blk, size);
    blk->size_known = r == 0;
  }
  else if (blk->size != size) {
    nbdkit_error ("cow: the base changed size from %" PRIu64 " to %" PRIu64
                  " bytes; the overlay cannot follow it", blk->size, size);
    r = -1;
  }
  pthread_mutex_unlock (&blk->state_lock);
  return r;
}

int
blk_flush (struct blk *blk, int *err)
{
  int r;

  if (!store_flushes (blk->store))
    return 0;
  lock_mutex (blk, &blk->flush_lock, BLK_LOCK_FLUSH);
  r = store_flush (blk->store, err);
  pthread_mutex_unlock (&blk->flush_lock);
  return r;
}

uint64_t
blk_state_run (struct blk *blk, uint64_t offset, uint64_t end,
               enum blk_state *state)
{
  uint64_t stop = blk_of (blk, end - 1) + 1;
  uint64_t run_end = blk_start (blk, state_run (blk, blk_of (blk, offset),
                                                stop, state));
  return run_end < end ? run_end : end;
}

/*----------------------------------------------------------------------
 * Copy-up: base data into the overlay.
 */

/* Stores blocks [first, first+n), whose base data is in buf, in the
 * overlay.  Blocks that read as zeros only become BLK_ZERO: a copy-up
 * of a sparse image then costs no space and no writes.  The others are
 * written, a run of them with one system call, and become allocated.
 * Requires their rmw locks and their states reserved.
 */
static int
store_copy_up (struct blk *blk, const char *buf, uint64_t first, uint64_t n,
               int *err)
{
  uint64_t i = 0, j;
  bool zero, next = is_zero (buf, blk->block_size);

  while (i < n) {
    zero = next;
    for (j = i + 1; j < n; ++j) {
      next = is_zero (buf + (j << blk->block_shift), blk->block_size);
      if (next != zero)
        break;
    }
    if (!zero &&
        overlay_write (blk, buf + (i << blk->block_shift),
                       (j - i) << blk->block_shift,
                       blk_start (blk, first + i), err) == -1)
      return -1;
    set_states (blk, first + i, j - i, zero ? BLK_ZERO : BLK_ALLOCATED);
    i = j;
  }
  return 0;
}

/* Copies blocks [first, first+n), all BLK_NOT_ALLOCATED, from the base
 * into the overlay and marks them allocated, counting them in kind.
 * Requires their rmw locks.
 */
static int
copy_up_run (struct blk *blk, const struct blk_base *base,
             uint64_t first, uint64_t n, enum counter kind, int *err)
{
  uint64_t chunk = COPY_UP_CHUNK >> blk->block_shift;
  char *buf;
  int r = 0;

  if (chunk == 0)
    chunk = 1;
  if (chunk > n)
    chunk = n;
  buf = scratch_get (chunk << blk->block_shift);
  if (buf == NULL) {
    *err = errno;
    nbdkit_error ("cow: malloc: %m");
    return -1;
  }
  while (n > 0 && r == 0) {
    uint64_t c = n < chunk ? n : chunk;
    uint64_t start = blk_start (blk, first);
    uint64_t len = blk_end (blk, first + c - 1) - start;
    uint64_t space = space_of_blocks (blk, first, c);

    r = space_take (&blk->space, NULL, space, err);
    if (r == -1)
      break;
    r = base_read (blk, base, buf, len, start, err);
    if (r == 0)
      r = reserve_states (blk, first, c, err);
    if (r == 0)
      r = store_copy_up (blk, buf, first, c, err);
    if (r == 0)
      stat_add (blk, kind, c);
    /* Blocks that stayed out of the overlay or became zero take none. */
    space_give (&blk->space,
                space - space_in_state (blk, first, c, BLK_ALLOCATED));
    first += c;
    n -= c;
  }
  scratch_put (buf);
  return r;
}

/* Copies the unallocated blocks touching the range, counting them in
 * kind (cow-on-read or cow-on-cache).
 */
static int
copy_up (struct blk *blk, const struct blk_base *base,
         uint32_t count, uint64_t offset, enum counter kind, int *err)
{
  struct rangelock_range held;
  uint64_t first, stop, b;
  int r = 0;

  if (count == 0)
    return 0;
  first = blk_of (blk, offset);
  stop = blk_of (blk, offset + count - 1) + 1;

  /* Nothing to copy, the usual case once data is in: take no lock. */
  for (b = first; b < stop; ) {
    enum blk_state state;
    uint64_t end = state_run (blk, b, stop, &state);
    if (state == BLK_NOT_ALLOCATED)
      break;
    b = end;
  }
  if (b == stop)
    return 0;

  /* Under the rmw locks the states are stable: look again and copy. */
  lock_rmw (blk, &held, first, stop - first);
  for (b = first; b < stop && r == 0; ) {
    enum blk_state state;
    uint64_t end = state_run (blk, b, stop, &state);
    if (state == BLK_NOT_ALLOCATED)
      r = copy_up_run (blk, base, b, end - b, kind, err);
    b = end;
  }
  rangelock_unlock (&blk->rmw_locks, &held);
  return r;
}

int
blk_copy_up (struct blk *blk, const struct blk_base *base,
             uint32_t count, uint64_t offset, int *err)
{
  return copy_up (blk, base, count, offset, COPY_UPS_CACHE, err);
}

/*----------------------------------------------------------------------
 * Reads.
 */

int
blk_read (struct blk *blk, const struct blk_base *base,
          void *buf, uint32_t count, uint64_t offset, bool cow_on_read,
          int *err)
{
  char *p = buf;
  uint64_t end = offset + count;

  /* After a copy-up every block of the range is allocated or zero, and
   * stays so: the loop below then reads only the overlay.
   */
  if (cow_on_read &&
      copy_up (blk, base, count, offset, COPY_UPS_READ, err) == -1)
    return -1;

  while (offset < end) {
    enum blk_state state;
    uint64_t run_end;
    uint32_t n;
    int r = 0;

    run_end = blk_state_run (blk, offset, end, &state);
    n = run_end - offset;
    if (state == BLK_ALLOCATED)
      r = overlay_read (blk, p, n, offset, err);
    else if (state == BLK_ZERO)
      memset (p, 0, n);
    else if (state == BLK_NOT_ALLOCATED)
      /* Exactly the bytes asked for: no whole-block bounce. */
      r = base_read (blk, base, p, n, offset, err);
    if (r == -1)
      return -1;
    p += n;
    offset = run_end;
  }
  return 0;
}

/*----------------------------------------------------------------------
 * Writes.
 */

/* The part [from, to) of block b that the range [offset, end) covers. */
static void
block_part (const struct blk *blk, uint64_t b, uint64_t offset, uint64_t end,
            uint64_t *from, uint64_t *to)
{
  uint64_t start = blk_start (blk, b), stop = blk_end (blk, b);

  *from = offset > start ? offset : start;
  *to = end < stop ? end : stop;
}

/*----------------------------------------------------------------------
 * What the base holds, as far as its extents tell (basemap.h), with the
 * waits for base_map_lock counted.
 */

/* True if block b of the base is known to read as zeros.  Requires the
 * rmw lock of b and no other lock: it may ask the base.
 */
static bool
base_reads_zeros (struct blk *blk, const struct blk_base *base, uint64_t b)
{
  uint64_t waited = 0;
  bool zeros = basemap_reads_zeros (&blk->base_map, base, b, &waited);

  if (waited)
    count_wait (blk, BLK_LOCK_BASE_MAP, waited);
  return zeros;
}

/* Whether block b, in the given state, reads as zeros without being in
 * the overlay: zeroed before, or over a part of the base known to read
 * as zeros.  Requires the rmw lock of b and no other lock.
 */
static bool
reads_zeros_outside (struct blk *blk, const struct blk_base *base,
                     enum blk_state state, uint64_t b)
{
  return state == BLK_ZERO ||
         (state == BLK_NOT_ALLOCATED && base_reads_zeros (blk, base, b));
}

/* Builds in data the new content of partial block b: its current
 * content (base or zeros) with the bytes of [offset, end) from buf
 * (zeros if buf is NULL) on top.  Sets *zero_rest if the current
 * content is all zeros.  A block over a part of the base that is known
 * to read as zeros (a hole of a sparse image) is not read at all: the
 * first write into each such block would otherwise fetch a whole block
 * of zeros, up to 1M of them, only to find they are zeros.  Nor are
 * zeros written into data for it: with *zero_rest, write_block reads
 * only the bytes of [offset, end).  state is b's state, never
 * BLK_ALLOCATED.  Requires the rmw lock of b.
 */
static int
rmw_fill (struct blk *blk, const struct blk_base *base, enum blk_state state,
          uint64_t b, const char *buf, uint64_t offset, uint64_t end,
          char *data, bool *zero_rest, int *err)
{
  uint64_t start = blk_start (blk, b), len = blk_end (blk, b) - start;
  uint64_t from, to;

  block_part (blk, b, offset, end, &from, &to);
  if (!reads_zeros_outside (blk, base, state, b)) {
    if (base_read (blk, base, data, len, start, err) == -1)
      return -1;
    stat_add (blk, COPY_UPS_RMW, 1);
    *zero_rest = is_zero (data, len);
  }
  else
    *zero_rest = true;
  if (buf != NULL)
    memcpy (data + (from - start), buf + (from - offset), to - from);
  else
    memset (data + (from - start), 0, to - from);
  return 0;
}

static bool
is_partial (const struct blk *blk, uint64_t b, uint64_t offset, uint64_t end)
{
  return offset > blk_start (blk, b) || end < blk_end (blk, b);
}

/* Writes partial block b, whose new content rmw_fill built in data
 * (with zero_rest, only the bytes of [offset, end)), into the
 * overlay.  If the rest of the block is zeros, the block is zeroed in
 * the overlay (overlay_write_locked of zeros:
 * FALLOC_FL_ZERO_RANGE, which allocates the space without writing it,
 * where the filesystem has it) and only the bytes of [offset, end) are
 * written, if they are not zeros too: copying 64K of zeros for every
 * 4K write into a fresh block was the largest cost of small random
 * writes (docs/performance.md).
 * Requires the rmw lock of b, which keeps punches away from it.
 */
static int
write_block (struct blk *blk, uint64_t b, const char *data, bool zero_rest,
             uint64_t offset, uint64_t end, int *err)
{
  uint64_t start = blk_start (blk, b), len = blk_end (blk, b) - start;
  uint64_t from, to;
  int r;

  if (!zero_rest)
    return overlay_write (blk, data, len, start, err);
  block_part (blk, b, offset, end, &from, &to);
  lock_file (blk, len, start);
  r = overlay_write_locked (blk, NULL, len, start, err);
  if (r == 0 && !is_zero (data + (from - start), to - from))
    r = overlay_write_locked (blk, data + (from - start), to - from, from,
                              err);
  unlock_file (blk, len, start);
  return r;
}

/* Writes [offset, end) of buf (zeros if NULL) into blocks [first, last]
 * and marks them allocated, read-modify-writing a partial block at
 * either end that is not in the overlay yet.  Requires the rmw locks
 * of [first, last], which keep all their states stable here.  The
 * space of the blocks not allocated yet is taken first (from *hold,
 * if not NULL, then from the budget), then come base reads, overlay
 * writes and the state change: a failure at any step changes no state
 * and gives the space back.
 */
static int
write_locked (struct blk *blk, const struct blk_base *base, const char *buf,
              uint64_t offset, uint64_t end, uint64_t first, uint64_t last,
              uint64_t *hold, int *err)
{
  char *head = NULL, *tail = NULL, *data;
  bool head_zero_rest = false, tail_zero_rest = false;
  uint64_t from = offset, to = end;
  uint64_t space = space_to_allocate (blk, first, last - first + 1);
  enum blk_state state;
  int r = -1;

  if (space_take (&blk->space, hold, space, err) == -1)
    return -1;
  /* Room for a partial block at each end, from the thread's cache. */
  data = scratch_get (2 * blk->block_size);
  if (data == NULL) {
    *err = errno;
    nbdkit_error ("cow: malloc: %m");
    space_give (&blk->space, space);
    return -1;
  }
  if (is_partial (blk, first, offset, end) &&
      (state = get_state (blk, first)) != BLK_ALLOCATED) {
    head = data;
    if (rmw_fill (blk, base, state, first, buf, offset, end, head,
                  &head_zero_rest, err) == -1)
      goto out;
    from = blk_end (blk, first);
  }
  if (last != first && is_partial (blk, last, offset, end) &&
      (state = get_state (blk, last)) != BLK_ALLOCATED) {
    tail = data + blk->block_size;
    if (rmw_fill (blk, base, state, last, buf, offset, end, tail,
                  &tail_zero_rest, err) == -1)
      goto out;
    to = blk_start (blk, last);
  }
  if (reserve_states (blk, first, last - first + 1, err) == -1)
    goto out;

  if (head &&
      write_block (blk, first, head, head_zero_rest, offset, end, err) == -1)
    goto out;
  if (from < to &&
      overlay_write (blk, buf ? buf + (from - offset) : NULL, to - from, from,
                     err) == -1)
    goto out;
  if (tail &&
      write_block (blk, last, tail, tail_zero_rest, offset, end, err) == -1)
    goto out;

  set_states (blk, first, last - first + 1, BLK_ALLOCATED);
  r = 0;
 out:
  if (r == -1)
    space_give (&blk->space, space);
  scratch_put (data);
  return r;
}

/* The fast path of blk_write: if blocks [first, last] are all
 * allocated, no copy-up can be running on any of them (see the top of
 * this file), so the bytes go straight to the overlay, with no rmw
 * lock, and *done is set.  The state lookup and the write hold the
 * write locks of the range together, and every punch takes the lock of
 * each file it punches (overlay_punch): a block
 * that a zero or trim racing this write discards is either punched
 * after the write or seen in its new state here, never written after
 * its punch, where the bytes would hold space no state accounts for.
 */
static int
write_allocated (struct blk *blk, const void *buf, uint64_t count,
                 uint64_t offset, uint64_t first, uint64_t last, bool *done,
                 int *err)
{
  int r = 0;

  lock_file (blk, count, offset);
  *done = all_in_state (blk, first, last - first + 1, BLK_ALLOCATED);
  if (*done)
    r = overlay_write_locked (blk, buf, count, offset, err);
  unlock_file (blk, count, offset);
  return r;
}

/* Whether the rmw path may only make blocks [first, last] allocated
 * and leave a write's bytes to the fast path (write_rmw): when they are
 * allocated already, or when the write is a part of one block (first)
 * that reads as zeros outside the overlay.  state is first's.
 * Requires the rmw locks of [first, last].
 */
static bool
leaves_bytes_to_fast_path (struct blk *blk, const struct blk_base *base,
                           const char *buf, uint64_t offset, uint64_t end,
                           uint64_t first, uint64_t last,
                           enum blk_state state)
{
  if (state == BLK_ALLOCATED)
    return all_in_state (blk, first, last - first + 1, BLK_ALLOCATED);
  return first == last && buf != NULL &&
         is_partial (blk, first, offset, end) &&
         reads_zeros_outside (blk, base, state, first);
}

/* The rmw path of blk_write, for a write into blocks [first, last]
 * that were not all allocated: takes their rmw locks and writes.  With
 * may_defer it may instead only make the blocks allocated and leave
 * the bytes to the fast path, setting *deferred, so that the writes
 * queued behind this one for the same block wait for its change of
 * state and not for its bytes as well:
 * - when a write that went first made the blocks allocated while this
 *   one waited for their locks: the bytes need no rmw lock any more;
 * - when the write is a part of one block that reads as zeros outside
 *   the overlay (a block's first write, into a hole of the base or a
 *   zeroed block): the block is allocated as zeros (a whole-block zero,
 *   which changes nothing a read sees), and its space taken, first.
 * Requires no lock.
 */
static int
write_rmw (struct blk *blk, const struct blk_base *base, const char *buf,
           uint64_t offset, uint64_t end, uint64_t first, uint64_t last,
           bool may_defer, bool *deferred, int *err)
{
  struct rangelock_range held;
  enum blk_state state;
  int r = 0;

  lock_rmw (blk, &held, first, last - first + 1);
  state = get_state (blk, first);
  *deferred = may_defer &&
              leaves_bytes_to_fast_path (blk, base, buf, offset, end, first,
                                         last, state);
  if (!*deferred)
    r = write_locked (blk, base, buf, offset, end, first, last, NULL, err);
  else if (state != BLK_ALLOCATED)
    r = write_locked (blk, base, NULL, blk_start (blk, first),
                      blk_end (blk, first), first, first, NULL, err);
  rangelock_unlock (&blk->rmw_locks, &held);
  return r;
}

/* buf NULL means zeros (blk_zero).  A write goes the rmw path at most
 * twice (write_rmw defers only the first time), so a block trimmed
 * again and again under it cannot keep it looping.
 */
int
blk_write (struct blk *blk, const struct blk_base *base,
           const void *buf, uint32_t count, uint64_t offset, int *err)
{
  uint64_t end = offset + count, first, last;
  bool done, deferred, may_defer = true;
  int r;

  if (count == 0)
    return 0;
  first = blk_of (blk, offset);
  last = blk_of (blk, end - 1);

  for (;;) {
    r = write_allocated (blk, buf, count, offset, first, last, &done, err);
    if (done)
      return r;
    r = write_rmw (blk, base, buf, offset, end, first, last, may_defer,
                   &deferred, err);
    if (r == -1 || !deferred)
      return r;
    may_defer = false;
  }
}

/*----------------------------------------------------------------------
 * Zero and trim.
 */

/* Marks blocks [first, first+n) BLK_ZERO, gives their space back and
 * punches them out of the overlay.  The state change comes first: from
 * then on reads return zeros whatever the overlay holds, so a
 * filesystem that cannot punch holes costs space, never correctness.
 * Requires their rmw locks.
 */
static int
discard_locked (struct blk *blk, uint64_t first, uint64_t n, int *err)
{
  uint64_t start = blk_start (blk, first), freed;

  if (reserve_states (blk, first, n, err) == -1)
    return -1;
  freed = space_in_state (blk, first, n, BLK_ALLOCATED);
  set_states (blk, first, n, BLK_ZERO);
  space_give (&blk->space, freed);
  if (overlay_punch (blk, blk_end (blk, first + n - 1) - start, start) == -1)
    nbdkit_debug ("cow: cannot punch a hole in the overlay: %m");
  return 0;
}

/* Writes zeros over the parts of [offset, end) in its first and last
 * blocks that do not cover their block.  A block that reads as zeros
 * without being in the overlay is left as it is: zeroing part of it
 * changes nothing, and writing it would take a block of space for
 * zeros.  The space the others need is taken first, so that a zero
 * refused for space changes nothing.  Requires the rmw locks of both
 * blocks, which keep their states, and so the space they need, stable.
 */
static int
zero_ends_locked (struct blk *blk, const struct blk_base *base,
                  uint64_t offset, uint64_t end, int *err)
{
  uint64_t ends[2] = { blk_of (blk, offset), blk_of (blk, end - 1) };
  size_t n = ends[0] == ends[1] ? 1 : 2, i;
  bool to_write[2] = { false, false };
  uint64_t hold = 0, from, to;
  int r = 0;

  for (i = 0; i < n; i++) {
    to_write[i] = is_partial (blk, ends[i], offset, end) &&
                  !reads_zeros_outside (blk, base, get_state (blk, ends[i]),
                                        ends[i]);
    if (to_write[i])
      hold += space_to_allocate (blk, ends[i], 1);
  }
  if (space_take (&blk->space, NULL, hold, err) == -1)
    return -1;
  for (i = 0; i < n && r == 0; i++) {
    if (!to_write[i])
      continue;
    block_part (blk, ends[i], offset, end, &from, &to);
    r = write_locked (blk, base, NULL, from, to, ends[i], ends[i], &hold,
                      err);
  }
  space_give (&blk->space, hold);
  return r;
}

/* Whole blocks of the range become BLK_ZERO; the partial ends are
 * written as zeros if zero_ends, else left alone (a trim).  All under
 * the rmw locks of every block touched.
 */
static int
discard_range (struct blk *blk, const struct blk_base *base,
               uint32_t count, uint64_t offset, bool zero_ends, int *err)
{
  struct rangelock_range held;
  uint64_t end = offset + count, first, stop, lock_from, lock_to;
  int r = 0;

  if (count == 0)
    return 0;
  whole_blocks (blk->block_shift, blk->size, offset, end, &first, &stop);
  if (first >= stop && !zero_ends)
    return 0;

  lock_from = zero_ends ? blk_of (blk, offset) : first;
  lock_to = zero_ends ? blk_of (blk, end - 1) + 1 : stop;
  lock_rmw (blk, &held, lock_from, lock_to - lock_from);
  if (zero_ends)
    r = zero_ends_locked (blk, base, offset, end, err);
  if (r == 0 && first < stop)
    r = discard_locked (blk, first, stop - first, err);
  rangelock_unlock (&blk->rmw_locks, &held);
  return r;
}

int
blk_zero (struct blk *blk, const struct blk_base *base,
          uint32_t count, uint64_t offset, bool may_trim, int *err)
{
  if (!may_trim)
    return blk_write (blk, base, NULL, count, offset, err);
  return discard_range (blk, base, count, offset, true, err);
}

int
blk_trim (struct blk *blk, uint32_t count, uint64_t offset, int *err)
{
  return discard_range (blk, NULL, count, offset, false, err);
}

/*----------------------------------------------------------------------
 * Statistics.
 */

const char *
blk_lock_name (enum blk_lock lock)
{
  static const char *const names[BLK_LOCKS] = {
    [BLK_LOCK_RMW] = "rmw_locks",
    [BLK_LOCK_STATE] = "state_lock",
    [BLK_LOCK_WRITE] = "write_lock",
    [BLK_LOCK_FLUSH] = "flush_lock",
    [BLK_LOCK_BASE_MAP] = "base_map_lock",
  };
  return names[lock];
}

/* Runs of states looked at per hold of state_lock: a walk of a large,
 * fragmented map must not keep requests waiting.
 */
#define STATS_RUNS_PER_LOCK 1024

static void
count_states (struct blk *blk, uint64_t blocks[3])
{
  uint64_t total = (blk->size + blk->block_size - 1) >> blk->block_shift;
  uint64_t b = 0;

  blocks[0] = blocks[1] = blocks[2] = 0;
  while (b < total) {
    unsigned runs;

    lock_mutex (blk, &blk->state_lock, BLK_LOCK_STATE);
    for (runs = 0; runs < STATS_RUNS_PER_LOCK && b < total; ++runs) {
      unsigned state;
      uint64_t end = statemap_run (&blk->states, b, total, &state);
      blocks[state] += end - b;
      b = end;
    }
    pthread_mutex_unlock (&blk->state_lock);
  }
}

/* size_known is read under state_lock: the stats thread can run before
 * the first connection sets the size.
 */
static bool
size_is_known (struct blk *blk)
{
  bool known;

  lock_mutex (blk, &blk->state_lock, BLK_LOCK_STATE);
  known = blk->size_known;
  pthread_mutex_unlock (&blk->state_lock);
  return known;
}

void
blk_get_stats (struct blk *blk, struct blk_stats *stats)
{
  unsigned i;

  memset (stats, 0, sizeof *stats);
  stats->block_size = blk->block_size;
  stats->files = store_files (blk->store);
  if (size_is_known (blk))
    count_states (blk, stats->blocks);
  stats->overlay_bytes = store_bytes (blk->store);
  stats->copy_ups_read = shardctr_sum (&blk->counters, COPY_UPS_READ);
  stats->copy_ups_cache = shardctr_sum (&blk->counters, COPY_UPS_CACHE);
  stats->copy_ups_rmw = shardctr_sum (&blk->counters, COPY_UPS_RMW);
  stats->base_reads = shardctr_sum (&blk->counters, BASE_READS);
  stats->base_read_bytes = shardctr_sum (&blk->counters, BASE_READ_BYTES);
  stats->space_limit = space_limit (&blk->space);
  stats->space_used = space_used (&blk->space);
  stats->space_refusals = space_refusals (&blk->space);
  for (i = 0; i < BLK_LOCKS; ++i) {
    stats->lock_waits[i] = shardctr_sum (&blk->counters, LOCK_WAITS + i);
    stats->lock_wait_ns[i] = shardctr_sum (&blk->counters, LOCK_WAIT_NS + i);
  }
}
