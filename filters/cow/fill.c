/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The background fill (fill.h): cow-fill-requests threads, each
 * copying one request of the fill at a time, the overlays in turn,
 * through the block layer's copy-ups (blk_fill).  A copy-up holds the
 * rmw locks of its range and copies only blocks not in the overlay, so
 * a client's write is never overwritten and a client's request waits
 * for at most one request of the fill.  Clients go first: while
 * clients are about, one thread alone fills, in small requests, and a
 * thread starts no request while a client's read of a base is under
 * way, for up to CLIENT_WAIT_MAX_NS at a time.  The threads read
 * through the overlay's pool of plugin contexts (basepool.h), paced
 * together by cow-fill-rate; a failed request is tried again
 * cow-fill-retries times before it stops the overlay's fill.
 */

#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "backoff.h"
#include "baseio.h"
#include "basepool.h"
#include "bgthread.h"
#include "checks.h"
#include "clonename.h"
#include "exports.h"
#include "fill.h"
#include "monotonic.h"
#include "nbdkitgaps.h"
#include "params.h"
#include "registry.h"
#include "server.h"
#include "space.h"

/* What one request of the fill copies. */
#define REQUEST (256 * 1024)

/* A kept overlay is flushed each time another PIECE bytes are filled,
 * so that a fill cut short reads again at most PIECE and the requests
 * then in flight (the man page's window).
 */
#define PIECE (4 * 1024 * 1024)

/* How long a thread waits while there is nothing to fill, or the
 * switch of cow-fill=/PATH is off.
 */
#define IDLE_NS (200 * 1000 * 1000)

/* While clients read a base, a thread looks again every
 * CLIENT_POLL_NS, and starts its request anyway after
 * CLIENT_WAIT_MAX_NS, so that busy clients slow the fill down but
 * never stop it.
 */
#define CLIENT_POLL_NS (1000 * 1000)
#define CLIENT_WAIT_MAX_NS (100 * 1000 * 1000)

/* For CLIENTS_QUIET_NS after a client connected or started a read of
 * a base, the fill keeps a single request of GENTLE_REQUEST bytes (or one
 * block, if larger) in flight, whatever cow-fill-requests: a source
 * shares its bandwidth among the reads it serves at once, so that a
 * client's read then shares it with that one small read at most.  The
 * other threads look again every QUIET_POLL_NS.
 */
#define CLIENTS_QUIET_NS UINT64_C (500000000)
#define GENTLE_REQUEST (64 * 1024)
#define QUIET_POLL_NS (10 * 1000 * 1000)

/* The first retry of a failed request waits this long, each next one
 * twice as long as the last, up to RETRY_FIRST_NS << RETRY_DOUBLINGS
 * (64 s).
 */
#define RETRY_FIRST_NS UINT64_C (1000000000)
#define RETRY_DOUBLINGS 6

/* One thread of the fill, and the request it tries again, if any. */
struct filler {
  struct bgthread thread;
  /* Its thread's alone: the request it tries again, and since when it
   * gives way to clients.
   */
  uint64_t retry_id;            /* the request's overlay, or 0 */
  uint64_t retry_offset;
  uint32_t retry_len;
  unsigned tries;               /* of that request, failed */
  uint64_t giving_way_since;    /* to clients, monotonic ns; 0: not */
  /* What f reads the base of overlay source_id through (0: none yet),
   * set up at its first request of that overlay: a context of the
   * overlay's pool, which lives as long as the overlay reads its base.
   */
  uint64_t source_id;
  struct base_io source;
};

static struct filler *fillers;
static unsigned n_fillers;
static nbdkit_backend *backend;
static unsigned turn;           /* atomic: the overlay whose turn it is */

/* The clients' base reads last seen started (blk_client_base_reads),
 * and when that count was last seen to change or a client connected
 * (monotonic ns): atomic.
 */
static unsigned client_reads_seen;
static uint64_t clients_seen_ns;

/* cow-fill-rate: when the threads together may start their next
 * request.
 */
static mutex_t pace_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t paced_until GUARDED_BY (pace_lock);

static enum fill_state
state_of (const struct overlay *o)
{
  return __atomic_load_n (&o->fill.state, __ATOMIC_ACQUIRE);
}

/* Moves o's fill from state from to state to, if it is in from. */
static void
move_state (struct overlay *o, enum fill_state from, enum fill_state to)
{
  __atomic_compare_exchange_n (&o->fill.state, &from, to, false,
                               __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
}

static bool
has_ended (const struct overlay *o)
{
  enum fill_state state = state_of (o);

  return state == FILL_COMPLETE || state == FILL_FAILED;
}

/* Whether o has requests of the fill to hand out (registry_wants). */
static bool
wants_fill (const struct overlay *o)
{
  uint64_t size = __atomic_load_n (&o->fill.size, __ATOMIC_RELAXED);

  return blk_is_sized (o->blk) && !has_ended (o) &&
         (size == 0 ||
          __atomic_load_n (&o->fill.claimed, __ATOMIC_RELAXED) < size);
}

/* cow-fill=/PATH and PATH is missing: the fill of o waits. */
static void
pause_fill (struct overlay *o)
{
  move_state (o, FILL_WAITING, FILL_PAUSED);
  move_state (o, FILL_RUNNING, FILL_PAUSED);
}

/* The fill of o has ended: its rate stops moving. */
static void
note_end (struct overlay *o)
{
  uint64_t none = 0;

  __atomic_compare_exchange_n (&o->fill.ended_ns, &none, monotonic_ns (),
                               false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

/* The fill of o stops with error err. */
static void
fail (struct overlay *o, int err)
{
  note_end (o);
  nbdkit_error ("cow-fill: export \"%s\": stopped with %" PRIu64
                " bytes filled: %s", o->exportname,
                __atomic_load_n (&o->fill.filled, __ATOMIC_RELAXED),
                strerror (err));
  __atomic_store_n (&o->fill.error, err, __ATOMIC_RELAXED);
  __atomic_store_n (&o->fill.state, FILL_FAILED, __ATOMIC_RELEASE);
}

static void
forget_retry (struct filler *f)
{
  f->retry_id = 0;
  f->tries = 0;
}

/* Whether f gives way to clients reading a base now. */
static bool
gives_way (struct filler *f, uint64_t now)
{
  if (!blk_client_base_reads_under_way () ||
      (f->giving_way_since && now - f->giving_way_since >= CLIENT_WAIT_MAX_NS)) {
    f->giving_way_since = 0;
    return false;
  }
  if (f->giving_way_since == 0)
    f->giving_way_since = now;
  return true;
}

void
fill_client_connecting (void)
{
  __atomic_store_n (&clients_seen_ns, monotonic_ns (), __ATOMIC_RELAXED);
}

/* Whether a client has connected or started a read of a base within
 * the last CLIENTS_QUIET_NS.
 */
static bool
clients_active (uint64_t now)
{
  unsigned started = blk_client_base_reads ();
  uint64_t seen_ns;

  if (__atomic_exchange_n (&client_reads_seen, started, __ATOMIC_RELAXED)
      != started) {
    __atomic_store_n (&clients_seen_ns, now, __ATOMIC_RELAXED);
    return true;
  }
  seen_ns = __atomic_load_n (&clients_seen_ns, __ATOMIC_RELAXED);
  return seen_ns != 0 && (now < seen_ns || now - seen_ns < CLIENTS_QUIET_NS);
}

/* The most f's next request may copy: REQUEST, or while clients are
 * about GENTLE_REQUEST (one block, if larger) for the first thread and
 * 0 (none) for the others.
 */
static uint32_t
request_max (const struct filler *f, uint64_t now)
{
  if (!clients_active (now))
    return REQUEST;
  if (f != fillers)
    return 0;
  return params.block_size > GENTLE_REQUEST ? params.block_size
    : GENTLE_REQUEST;
}

/* When the next request may start, the last having read len bytes
 * of the base.
 */
static uint64_t
paced (uint64_t now, uint64_t len)
{
  uint64_t due;

  if (params.fill_rate == 0)
    return now;
  held_lock (&pace_lock);
  if (paced_until < now)
    paced_until = now;
  paced_until += len * UINT64_C (1000000000) / params.fill_rate;
  due = paced_until;
  held_unlock (&pace_lock);
  return due;
}

/* Whether filling len more bytes leaves the clients their share of
 * cow-max-size.
 */
static bool
has_room (uint32_t len)
{
  uint64_t reserve = space_reserve_of (params.max_size);

  return server_space_left () >= reserve + 2 * (uint64_t) len;
}

/* Sets up io to read o's base through a context of pool, o's (o being
 * one of its users), learning the base's size the first time.
 * Returns 0, or -1 (said why, unless a named export's connections have
 * opened no context for it yet): a later turn tries again.
 */
static int
open_base (struct overlay *o, struct base_pool *pool, struct base_io *io)
{
  char *base = clone_base_name (o->exportname, params.clone_separator);
  struct base_use use;
  uint64_t none = 0;

  if (base == NULL) {
    nbdkit_error ("cow-fill: %m");
    return -1;
  }
  /* A context opened in this thread, outside any connection, would
   * tell the plugin no export name: from nbdkit 1.44 on a named
   * export's come from its connections (exports_connect).  Before, no
   * context opened for sharing tells the plugin a name (the man page
   * says what that means for the fill).
   */
  use = basepool_take (pool, base[0] && SHARED_KNOWS_NAME ? NULL : backend,
                       base, NULL);
  free (base);
  exports_count_plugin_opens (o, use.opened);
  if (use.next == NULL ||
      baseio_init (io, use.next, true, use.call_lock) == -1)
    return -1;
  if (__atomic_compare_exchange_n (&o->fill.size, &none, io->size, false,
                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    __atomic_store_n (&o->fill.started_ns, monotonic_ns (),
                      __ATOMIC_RELAXED);
  return 0;
}

/* Hands out o's next request, of at most max bytes: sets *offset and
 * returns its length, or 0 if every request is out.
 */
static uint32_t
claim (struct overlay *o, uint32_t max, uint64_t *offset)
{
  uint64_t size = __atomic_load_n (&o->fill.size, __ATOMIC_RELAXED);
  uint64_t at = __atomic_fetch_add (&o->fill.claimed, max, __ATOMIC_RELAXED);

  if (at >= size)
    return 0;
  *offset = at;
  return size - at < max ? size - at : max;
}

/* Whether nothing of o is left to fill before its first request is
 * handed out (a kept overlay filled before a restart): then every
 * request is taken at once, filled.
 */
static bool
holds_all (struct overlay *o, uint64_t size)
{
  uint64_t none = 0;

  if (__atomic_load_n (&o->fill.claimed, __ATOMIC_RELAXED) != 0 ||
      !blk_holds_all (o->blk) ||
      !__atomic_compare_exchange_n (&o->fill.claimed, &none, size, false,
                                    __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    return false;
  __atomic_store_n (&o->fill.filled, size, __ATOMIC_RELEASE);
  nbdkit_debug ("cow-fill: export \"%s\": the overlay holds every block",
                o->exportname);
  return true;
}

static void
mark_complete (struct overlay *o)
{
  note_end (o);
  move_state (o, FILL_WAITING, FILL_COMPLETE);
  move_state (o, FILL_PAUSED, FILL_COMPLETE);
  move_state (o, FILL_RUNNING, FILL_COMPLETE);
}

/* Every request of o is filled: o stands alone, with the facts of the
 * plugin io reads (which a failure only leaves unsaid: its connections
 * then go on opening the plugin).
 */
static void
complete (struct overlay *o, const struct base_io *io)
{
  struct base_facts *facts = baseio_facts_new (io);
  struct kept_facts kept;

  nbdkit_debug ("cow-fill: export \"%s\": complete", o->exportname);
  mark_complete (o);
  if (facts == NULL)
    return;
  if (baseio_facts_to_kept (facts, &kept))
    blk_keep_facts (o->blk, &kept);     /* said why if it failed */
  registry_stand_alone (o, facts);
}

/* o stands alone, every block in it (kept, from a run before): its
 * fill is complete, having read nothing.
 */
static void
complete_alone (struct overlay *o)
{
  uint64_t size = blk_size (o->blk), none = 0;

  if (has_ended (o))
    return;
  if (__atomic_compare_exchange_n (&o->fill.size, &none, size, false,
                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
    __atomic_store_n (&o->fill.started_ns, monotonic_ns (),
                      __ATOMIC_RELAXED);
  __atomic_store_n (&o->fill.claimed, size, __ATOMIC_RELAXED);
  __atomic_store_n (&o->fill.filled, size, __ATOMIC_RELEASE);
  nbdkit_debug ("cow-fill: export \"%s\": the overlay holds every block, "
                "and stands alone", o->exportname);
  mark_complete (o);
}

/* A request of len bytes of o is filled: a kept overlay is flushed
 * after every PIECE, and when the last request ends.
 */
static void
count_filled (struct overlay *o, const struct base_io *io, uint32_t len)
{
  uint64_t size = __atomic_load_n (&o->fill.size, __ATOMIC_RELAXED);
  uint64_t filled = __atomic_add_fetch (&o->fill.filled, len,
                                        __ATOMIC_RELEASE);
  int err;

  if ((filled - len) / PIECE == filled / PIECE && filled < size)
    return;
  if (blk_flush (o->blk, &err) == -1) {
    fail (o, err);
    return;
  }
  if (filled == size)
    complete (o, io);
}

/* Request [offset, offset+len) of o failed with err: f tries it again
 * later, or it stops the fill.  Returns when f is next due.
 */
static uint64_t
request_failed (struct filler *f, struct overlay *o, uint64_t offset,
                uint32_t len, int err, uint64_t now)
{
  uint64_t delay = backoff_delay (RETRY_FIRST_NS, f->tries + 1,
                                  RETRY_DOUBLINGS);
  char of[32] = "";
  bool limited;

  __atomic_store_n (&o->fill.error, err, __ATOMIC_RELAXED);
  if (err == ENOSPC || f->tries >= params.fill_retries) {
    forget_retry (f);
    fail (o, err);
    return now;
  }
  f->retry_id = o->id;
  f->retry_offset = offset;
  f->retry_len = len;
  if (f->tries < UINT_MAX - 1)
    f->tries++;
  __atomic_add_fetch (&o->fill.retries, 1, __ATOMIC_RELAXED);
  limited = params.fill_retries != FILL_RETRIES_NO_LIMIT;
  if (limited)
    snprintf (of, sizeof of, " of %u", params.fill_retries);
  nbdkit_error ("cow-fill: export \"%s\": reading %" PRIu32 " bytes at "
                "%" PRIu64 ": %s: trying again in %" PRIu64 " s (%s%u%s)",
                o->exportname, len, offset, strerror (err),
                delay / RETRY_FIRST_NS, limited ? "" : "try ", f->tries, of);
  return now + delay;
}

/* Whether f's source is set up for o, setting it up at f's first
 * request of o (o's pool being pool); if it cannot be, *due is when f
 * is next due: a later turn tries again, or the fill of o failed.
 */
static bool
source_ready (struct filler *f, struct overlay *o, struct base_pool *pool,
              uint64_t now, uint64_t *due)
{
  if (f->source_id == o->id)
    return true;
  f->source_id = 0;
  if (open_base (o, pool, &f->source) == -1) {
    *due = now + IDLE_NS;
    return false;
  }
  if (blk_set_size (o->blk, f->source.size) == -1) {   /* said why */
    forget_retry (f);
    fail (o, EINVAL);
    *due = now;
    return false;
  }
  f->source_id = o->id;
  return true;
}

/* Fills one request of o, of at most max bytes, o being pinned and a
 * user of its pool, pool: the one f tries again, or the next.  Returns
 * when f is next due.
 */
static uint64_t
fill_request (struct filler *f, struct overlay *o, struct base_pool *pool,
              uint32_t max, uint64_t now)
{
  struct base_io *io = &f->source;
  uint64_t read_bytes = 0, due;
  uint64_t offset = f->retry_offset;
  uint32_t len = f->retry_len;
  int err, r;

  if (has_ended (o)) {
    forget_retry (f);
    return now;
  }
  if (!source_ready (f, o, pool, now, &due))
    return due;
  if (io->size == 0 || holds_all (o, io->size)) {  /* nothing to fill */
    complete (o, io);
    return now;
  }
  if (f->retry_id == 0 && (len = claim (o, max, &offset)) == 0)
    return now;
  if (!has_room (len)) {
    nbdkit_error ("cow-fill: export \"%s\": cow-max-size=%s leaves the "
                  "rest to the clients' writes", o->exportname,
                  params.max_size_arg);
    forget_retry (f);
    fail (o, ENOSPC);
    return now;
  }
  move_state (o, FILL_WAITING, FILL_RUNNING);
  move_state (o, FILL_PAUSED, FILL_RUNNING);
  io->blk.background_bytes = &read_bytes;
  r = blk_fill (o->blk, &io->blk, len, offset, &err);
  io->blk.background_bytes = NULL;
  __atomic_add_fetch (&o->fill.read, read_bytes, __ATOMIC_RELAXED);
  if (r == -1)
    return request_failed (f, o, offset, len, err, now);
  if (f->tries > 0)             /* the source is back */
    __atomic_store_n (&o->fill.error, 0, __ATOMIC_RELAXED);
  forget_retry (f);
  count_filled (o, io, len);
  return paced (now, read_bytes);
}

/* The overlay f fills next, pinned: the one of its request tried
 * again, or the one whose turn it is.  NULL if none wants the fill, or
 * if the overlay of f's request has ended (f forgets the request).
 */
static struct overlay *
pin_next (struct filler *f)
{
  struct overlay *o;

  if (f->retry_id == 0)
    return registry_pin_turn (__atomic_fetch_add (&turn, 1, __ATOMIC_RELAXED),
                              wants_fill);
  o = registry_pin_id (f->retry_id);
  if (o == NULL)                /* it has ended */
    forget_retry (f);
  return o;
}

/* The bgthread_fn of a filler. */
static uint64_t
fill_due (uint64_t now, void *opaque)
{
  struct filler *f = opaque;
  bool retrying = f->retry_id != 0;
  struct base_pool *pool;
  struct overlay *o;
  uint32_t max;
  uint64_t due;

  if (!params_switch_on (&params.fill)) {
    registry_each_wanted (wants_fill, pause_fill);
    return now + IDLE_NS;
  }
  if (gives_way (f, now))
    return now + CLIENT_POLL_NS;
  o = pin_next (f);
  if (o == NULL)
    return retrying ? now : now + IDLE_NS;
  /* Asked once o is found: the connection that made it is seen. */
  max = request_max (f, now);
  if (max == 0)
    due = now + QUIET_POLL_NS;
  else if ((pool = registry_pool_use (o)) == NULL) {    /* it stands alone */
    forget_retry (f);
    complete_alone (o);
    due = now;
  }
  else {
    due = fill_request (f, o, pool, max, now);
    registry_pool_done (o);
  }
  registry_unpin (o);
  return due;
}

int
fill_start (nbdkit_backend *b)
{
  unsigned i;

  if (params.fill.mode == SWITCH_OFF)
    return 0;
  backend = b;
  fillers = calloc (params.fill_requests, sizeof *fillers);
  if (fillers == NULL) {
    nbdkit_error ("cow-fill: %m");
    return -1;
  }
  for (i = 0; i < params.fill_requests; ++i, ++n_fillers) {
    fillers[i].thread = (struct bgthread) BGTHREAD_INIT;
    if (bgthread_start (&fillers[i].thread, fill_due, &fillers[i]) == -1) {
      nbdkit_error ("cow-fill: cannot start a thread: %m");
      return -1;
    }
  }
  return 0;
}

void
fill_stop (void)
{
  unsigned i;

  for (i = 0; i < n_fillers; ++i) {
    bgthread_stop (&fillers[i].thread);
    forget_retry (&fillers[i]);
  }
  free (fillers);
  fillers = NULL;
  n_fillers = 0;
}
