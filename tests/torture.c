/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A concurrent torture client for the cow filter, on libnbd's
 * asynchronous API.
 *
 * N connections each keep a deep queue of random reads, writes, write
 * zeroes, trims, flushes and caches of random aligned and unaligned
 * sizes.  Nine requests in ten fall in a hot window of a few blocks
 * that every connection shares; the window creeps through the disk, so
 * blocks never touched before (which need copy-ups and
 * read-modify-writes) keep arriving and are raced by all connections at
 * once.  A block is only fresh once, so a small disk alone would stop
 * exercising copy-ups within a second.  A model checks every read:
 *
 *  - Each byte of the disk has a history of versions: the base, then
 *    one per write, zero or (whole-block) trim that covered it, with the
 *    logical times at which it was issued and completed.
 *  - When a request completes successfully, every version of its bytes
 *    that had completed before it was issued can no longer be current:
 *    it is marked removed at that time.  A failed (or abandoned) write
 *    removes nothing and stays possible: it may have been applied in
 *    part.
 *  - A read issued at time s and completed at time e may return, for
 *    each byte, the value of any version issued before e and not
 *    removed before s.  So overlapping requests in flight allow several
 *    values; once a write has completed, only it or newer ones may
 *    appear.
 *
 * Versions removed before the oldest read in flight began are dropped,
 * and byte ranges with identical histories share one segment, so the
 * model stays small however long the run.
 *
 * Exit status: 0 if every read matched, 1 on a mismatch (printing the
 * seed that reproduces the sequence of requests), 2 on other errors.
 */

#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#define MAX_REQUEST (256 * 1024)

enum op { OP_READ, OP_WRITE, OP_ZERO, OP_TRIM, OP_FLUSH, OP_CACHE, NR_OPS };
static const char *op_name[NR_OPS] = {
  "read", "write", "zero", "trim", "flush", "cache"
};

/* Options. */
static unsigned nr_conns = 8;
static unsigned queue_depth = 32;
static double duration = 10;
static uint64_t block_size;        /* 0: the server's preferred size */
static unsigned seed;
static const char *base_file;
static const char *faults_file;     /* --faults: faults while this exists */
static bool enospc_expected;        /* --enospc: the overlay has a size cap */
static unsigned disconnect_every;   /* --disconnect-every: hostile closes */
static bool quiet;

/* The disk and its base. */
static uint64_t disk_size;
static unsigned char *base;

/* Logical time: advanced at every issue and every completion. */
static uint64_t now;

/*----------------------------------------------------------------------
 * Values: what byte x holds after version id wrote it.
 */

enum kind { KIND_BASE, KIND_DATA, KIND_ZERO };

static unsigned char
data_byte (uint32_t id, uint64_t x)
{
  uint64_t h = x * UINT64_C (0x9E3779B97F4A7C15) ^
    (uint64_t) id * UINT64_C (0xC2B2AE3D27D4EB4F);
  h ^= h >> 29;
  h *= UINT64_C (0xBF58476D1CE4E5B9);
  h ^= h >> 32;
  return h >> 56;
}

static unsigned char
version_byte (enum kind kind, uint32_t id, uint64_t x)
{
  switch (kind) {
  case KIND_BASE: return base[x];
  case KIND_DATA: return data_byte (id, x);
  default: return 0;
  }
}

/*----------------------------------------------------------------------
 * The model: segments of bytes with identical version histories.
 */

#define NEVER UINT64_MAX

struct version {
  uint32_t id;
  uint8_t kind;             /* enum kind */
  uint64_t issued;
  uint64_t completed;       /* NEVER while in flight */
  uint64_t removed;         /* NEVER while still possibly current */
};

struct segment {
  uint64_t start;           /* ends where the next segment starts */
  struct version *v;
  size_t nv;
};

static struct segment *segs;
static size_t nr_segs, segs_alloc;

static void *
xrealloc (void *p, size_t n)
{
  p = realloc (p, n);
  if (p == NULL && n > 0) {
    perror ("realloc");
    exit (2);
  }
  return p;
}

static uint64_t
seg_end (size_t i)
{
  return i + 1 < nr_segs ? segs[i + 1].start : disk_size;
}

/* Index of the segment holding byte x. */
static size_t
seg_find (uint64_t x)
{
  size_t lo = 0, hi = nr_segs;

  while (hi - lo > 1) {
    size_t mid = (lo + hi) / 2;
    if (segs[mid].start <= x)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

/* Makes x a segment boundary; returns the index of the segment
 * starting at x (nr_segs if x == disk_size).
 */
static size_t
seg_split (uint64_t x)
{
  size_t i;

  if (x >= disk_size)
    return nr_segs;
  i = seg_find (x);
  if (segs[i].start == x)
    return i;
  if (nr_segs == segs_alloc) {
    segs_alloc = segs_alloc ? 2 * segs_alloc : 1024;
    segs = xrealloc (segs, segs_alloc * sizeof *segs);
  }
  memmove (&segs[i + 2], &segs[i + 1], (nr_segs - i - 1) * sizeof *segs);
  nr_segs++;
  segs[i + 1].start = x;
  segs[i + 1].nv = segs[i].nv;
  segs[i + 1].v = xrealloc (NULL, segs[i].nv * sizeof (struct version));
  memcpy (segs[i + 1].v, segs[i].v, segs[i].nv * sizeof (struct version));
  return i + 1;
}

static void
model_init (void)
{
  segs_alloc = 1024;
  segs = xrealloc (NULL, segs_alloc * sizeof *segs);
  nr_segs = 1;
  segs[0].start = 0;
  segs[0].nv = 1;
  segs[0].v = xrealloc (NULL, sizeof (struct version));
  segs[0].v[0] = (struct version) {
    .id = 0, .kind = KIND_BASE, .issued = 0, .completed = 0, .removed = NEVER
  };
}

/* A request as the model sees it: the range of bytes it changes. */
struct change {
  uint32_t id;
  enum kind kind;
  uint64_t offset, end;     /* empty for a trim with no whole block */
};

/* Makes the bytes a change covers whole segments [*first, *last).
 * Returns false if it covers none.
 */
static bool
seg_range (const struct change *c, size_t *first, size_t *last)
{
  if (c->offset >= c->end)
    return false;
  *first = seg_split (c->offset);
  *last = seg_split (c->end);
  return true;
}

static void
model_issue (const struct change *c, uint64_t issued)
{
  size_t i, last;

  if (!seg_range (c, &i, &last))
    return;
  for (; i < last; ++i) {
    struct segment *s = &segs[i];
    s->v = xrealloc (s->v, (s->nv + 1) * sizeof (struct version));
    s->v[s->nv++] = (struct version) {
      .id = c->id, .kind = c->kind, .issued = issued,
      .completed = NEVER, .removed = NEVER
    };
  }
}

/* Drops versions no read in flight or to come can see: removed at or
 * before oldest, the issue time of the oldest read in flight.
 */
static void
seg_prune (struct segment *s, uint64_t oldest)
{
  size_t j, k = 0;

  for (j = 0; j < s->nv; ++j)
    if (s->v[j].removed == NEVER || s->v[j].removed > oldest)
      s->v[k++] = s->v[j];
  s->nv = k;
}

/* ok: it succeeded, so it replaced what was there before it began.
 * completed: when it ended, or NEVER for one abandoned by a hang-up,
 * which the server may still apply at any later time.
 */
static void
model_complete (const struct change *c, uint64_t issued, bool ok,
                bool refused, uint64_t completed, uint64_t oldest)
{
  size_t i, last;

  if (!seg_range (c, &i, &last))
    return;
  for (; i < last; ++i) {
    struct segment *s = &segs[i];
    size_t j;

    for (j = 0; j < s->nv; ++j) {
      struct version *v = &s->v[j];
      if (v->id == c->id) {
        v->completed = completed;
        /* A request refused for space changed nothing: no read that
         * began after it was issued may see it.
         */
        if (refused)
          v->removed = v->issued;
      }
      else if (ok && v->completed < issued && v->removed == NEVER)
        v->removed = now;
    }
    seg_prune (s, oldest);
  }
}

static bool
same_history (const struct segment *a, const struct segment *b)
{
  return a->nv == b->nv &&
    memcmp (a->v, b->v, a->nv * sizeof (struct version)) == 0;
}

/* Prunes every segment and merges neighbours with the same history. */
static void
model_compact (uint64_t oldest)
{
  size_t i, k = 0;

  for (i = 0; i < nr_segs; ++i) {
    seg_prune (&segs[i], oldest);
    if (k > 0 && same_history (&segs[k - 1], &segs[i])) {
      free (segs[i].v);
      continue;
    }
    segs[k++] = segs[i];
  }
  nr_segs = k;
}

/* Checks what a read returned.  Returns the offset of the first byte
 * no version allows, or -1.
 */
static int64_t
model_check_read (const unsigned char *buf, uint64_t offset, uint64_t count,
                  uint64_t issued, uint64_t completed)
{
  uint64_t x = offset, end = offset + count;
  size_t i = seg_find (offset);

  for (; x < end; ++i) {
    const struct segment *s = &segs[i];
    uint64_t stop = seg_end (i) < end ? seg_end (i) : end;

    for (; x < stop; ++x) {
      size_t j;
      bool allowed = false;

      for (j = 0; j < s->nv && !allowed; ++j) {
        const struct version *v = &s->v[j];
        if (v->issued < completed && v->removed > issued &&
            version_byte (v->kind, v->id, x) == buf[x - offset])
          allowed = true;
      }
      if (!allowed)
        return x;
    }
  }
  return -1;
}

/*----------------------------------------------------------------------
 * Requests and connections.
 */

struct conn;

struct request {
  struct conn *conn;
  enum op op;
  uint64_t offset, count;
  uint64_t issued;
  struct change change;     /* what it changes, for writes/zero/trim */
  unsigned char *buf;
  struct request *next;     /* in the connection's list in flight */
};

struct conn {
  struct nbd_handle *h;
  unsigned in_flight;
  struct request *requests;
  bool hanging_up;          /* requests completing now are abandoned */
};

static const char *uri;
static struct conn *conns;
static uint32_t next_id = 1;
static unsigned rng_state;

/* Statistics. */
static uint64_t ops_done[NR_OPS], ops_failed[NR_OPS], reads_checked;
static uint64_t refused;            /* failed with ENOSPC, under --enospc */
static uint64_t mismatches, disconnects;

static uint64_t
rnd (uint64_t n)
{
  uint64_t r = ((uint64_t) rand_r (&rng_state) << 31) ^ rand_r (&rng_state);
  return n ? r % n : 0;
}

/* The oldest issue time of a read in flight, or now. */
static uint64_t
oldest_read (void)
{
  uint64_t oldest = now;
  unsigned c;

  for (c = 0; c < nr_conns; ++c)
    for (struct request *r = conns[c].requests; r; r = r->next)
      if (r->op == OP_READ && r->issued < oldest)
        oldest = r->issued;
  return oldest;
}

static void
unlink_request (struct request *req)
{
  struct request **p = &req->conn->requests;

  while (*p != req)
    p = &(*p)->next;
  *p = req->next;
  req->conn->in_flight--;
}

static void
report_mismatch (const struct request *req, int64_t bad)
{
  size_t i = seg_find (bad), j;

  mismatches++;
  fprintf (stderr,
           "torture: MISMATCH: read of %" PRIu64 "+%" PRIu64
           " (issued t=%" PRIu64 ", completed t=%" PRIu64 ") byte %" PRId64
           " = 0x%02x; allowed:\n",
           req->offset, req->count, req->issued, now, bad,
           req->buf[bad - req->offset]);
  for (j = 0; j < segs[i].nv; ++j) {
    const struct version *v = &segs[i].v[j];
    fprintf (stderr, "  id %" PRIu32 " kind %d value 0x%02x issued %" PRIu64
             " completed %" PRIu64 " removed %" PRIu64 "\n",
             v->id, v->kind, version_byte (v->kind, v->id, bad),
             v->issued, v->completed, v->removed);
  }
}

/* Completion of a request: from libnbd's callback, or abandoned by a
 * hang-up.
 */
static void
finish (struct request *req, int error, bool abandoned)
{
  bool ok = error == 0;
  bool was_refused = enospc_expected && error == ENOSPC;

  now++;
  unlink_request (req);
  if (ok)
    ops_done[req->op]++;
  else if (was_refused)
    refused++;
  else {
    ops_failed[req->op]++;
    if (!faults_file && !disconnect_every)
      fprintf (stderr, "torture: %s %" PRIu64 "+%" PRIu64 " failed: %s\n",
               op_name[req->op], req->offset, req->count, strerror (error));
  }

  if (req->op == OP_READ && ok) {
    int64_t bad = model_check_read (req->buf, req->offset, req->count,
                                    req->issued, now);
    reads_checked++;
    if (bad >= 0)
      report_mismatch (req, bad);
  }
  if (req->op == OP_WRITE || req->op == OP_ZERO || req->op == OP_TRIM)
    model_complete (&req->change, req->issued, ok, was_refused,
                    abandoned ? NEVER : now, oldest_read ());
  free (req->buf);
  free (req);
}

static int
completion_cb (void *user_data, int *error)
{
  struct request *req = user_data;

  finish (req, *error, req->conn->hanging_up);
  return 1;                     /* retire the command */
}

/* The hot window: WINDOW_BLOCKS blocks (at least WINDOW_MIN bytes),
 * moving one block on every WINDOW_STEP requests and wrapping at the
 * end of the disk.
 */
#define WINDOW_BLOCKS 4
#define WINDOW_MIN (256 * 1024)
#define WINDOW_STEP 64

static uint64_t requests_issued;

static void
window (uint64_t *start, uint64_t *len)
{
  uint64_t nblocks = (disk_size + block_size - 1) / block_size;

  *len = WINDOW_BLOCKS * block_size;
  if (*len < WINDOW_MIN)
    *len = WINDOW_MIN;
  if (*len > disk_size)
    *len = disk_size;
  *start = (requests_issued / WINDOW_STEP) % nblocks * block_size;
  if (*start > disk_size - *len)
    *start = disk_size - *len;
}

/* A range with heads and tails on and off block boundaries, mostly in
 * the hot window.
 */
static void
pick_range (uint64_t *offset, uint64_t *count)
{
  uint64_t max = disk_size < MAX_REQUEST ? disk_size : MAX_REQUEST;
  uint64_t lo = 0, len = disk_size;

  if (rnd (10) != 0)
    window (&lo, &len);
  switch (rnd (6)) {
  case 0:                                       /* whole blocks */
    *offset = lo + rnd (len) / block_size * block_size;
    *count = block_size * (1 + rnd (2));
    break;
  case 1:                                       /* sectors */
    *offset = lo + rnd (len) / 512 * 512;
    *count = 512 * (1 + rnd (16));
    break;
  case 2:                                       /* the very end */
    *count = 1 + rnd (max);
    *offset = disk_size - (*count < disk_size ? *count : disk_size);
    break;
  default:                                      /* any bytes */
    *offset = lo + rnd (len);
    *count = 1 + rnd (rnd (4) == 0 ? max : 8192);
    break;
  }
  if (*offset >= disk_size)
    *offset = disk_size - 1;
  if (*count > disk_size - *offset)
    *count = disk_size - *offset;
  if (*count > max)
    *count = max;
}

/* What a request changes in the model.  A trim zeroes the whole blocks
 * inside it (the filter's documented behaviour) and nothing else.
 */
static struct change
change_of (enum op op, uint64_t offset, uint64_t count)
{
  struct change c = { .id = next_id++, .offset = offset, .end = offset + count };

  switch (op) {
  case OP_WRITE:
    c.kind = KIND_DATA;
    break;
  case OP_ZERO:
    c.kind = KIND_ZERO;
    break;
  case OP_TRIM:
    c.kind = KIND_ZERO;
    c.offset = (offset + block_size - 1) / block_size * block_size;
    if (c.end != disk_size)
      c.end = c.end / block_size * block_size;
    break;
  default:
    c.end = c.offset;                           /* changes nothing */
  }
  return c;
}

static void
issue (struct conn *conn)
{
  struct request *req = calloc (1, sizeof *req);
  nbd_completion_callback cb = { .callback = completion_cb };
  unsigned r = rnd (100);
  int64_t cookie = -1;
  uint64_t x;

  if (req == NULL) {
    perror ("calloc");
    exit (2);
  }
  requests_issued++;
  req->conn = conn;
  req->op = r < 35 ? OP_READ : r < 70 ? OP_WRITE : r < 82 ? OP_ZERO :
    r < 92 ? OP_TRIM : r < 95 ? OP_FLUSH : OP_CACHE;
  pick_range (&req->offset, &req->count);
  req->change = change_of (req->op, req->offset, req->count);
  cb.user_data = req;

  if (req->op == OP_READ || req->op == OP_WRITE) {
    req->buf = malloc (req->count);
    if (req->buf == NULL) {
      perror ("malloc");
      exit (2);
    }
  }
  if (req->op == OP_WRITE)
    for (x = 0; x < req->count; ++x)
      req->buf[x] = data_byte (req->change.id, req->offset + x);

  req->issued = ++now;
  model_issue (&req->change, req->issued);
  req->next = conn->requests;
  conn->requests = req;
  conn->in_flight++;

  switch (req->op) {
  case OP_READ:
    cookie = nbd_aio_pread (conn->h, req->buf, req->count, req->offset, cb, 0);
    break;
  case OP_WRITE:
    cookie = nbd_aio_pwrite (conn->h, req->buf, req->count, req->offset, cb,
                             rnd (8) == 0 ? LIBNBD_CMD_FLAG_FUA : 0);
    break;
  case OP_ZERO: {
    static const uint32_t flags[] = {
      0, LIBNBD_CMD_FLAG_NO_HOLE, LIBNBD_CMD_FLAG_FAST_ZERO
    };
    cookie = nbd_aio_zero (conn->h, req->count, req->offset, cb,
                           flags[rnd (3)]);
    break;
  }
  case OP_TRIM:
    cookie = nbd_aio_trim (conn->h, req->count, req->offset, cb, 0);
    break;
  case OP_FLUSH:
    cookie = nbd_aio_flush (conn->h, cb, 0);
    break;
  case OP_CACHE:
    cookie = nbd_aio_cache (conn->h, req->count, req->offset, cb, 0);
    break;
  case NR_OPS:
    abort ();
  }
  if (cookie == -1) {
    fprintf (stderr, "torture: %s: %s\n", op_name[req->op], nbd_get_error ());
    exit (2);
  }
}

static void
conn_open (struct conn *conn)
{
  conn->h = nbd_create ();
  if (conn->h == NULL || nbd_connect_uri (conn->h, uri) == -1) {
    fprintf (stderr, "torture: connect %s: %s\n", uri, nbd_get_error ());
    exit (2);
  }
}

/* Hangs up with requests in flight, as a crashing client would: the
 * writes in flight may or may not have happened, so they stay possible.
 */
static void
conn_abandon (struct conn *conn)
{
  conn->hanging_up = true;
  nbd_close (conn->h);        /* may complete requests with errors */
  while (conn->requests)
    finish (conn->requests, ESHUTDOWN, true);
  conn->hanging_up = false;
  disconnects++;
  conn_open (conn);
}

/* Runs the event loop until every connection has nothing in flight,
 * issuing new requests while keep_issuing.
 */
static void
run_loop (bool keep_issuing, double until)
{
  static uint64_t last_compact;
  struct pollfd fds[nr_conns];

  for (;;) {
    struct timespec ts;
    unsigned c, busy = 0;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    if (keep_issuing && ts.tv_sec + ts.tv_nsec / 1e9 >= until)
      keep_issuing = false;

    for (c = 0; c < nr_conns; ++c) {
      struct conn *conn = &conns[c];
      unsigned dir;

      while (keep_issuing && conn->in_flight < queue_depth)
        issue (conn);
      if (keep_issuing && disconnect_every &&
          rnd (disconnect_every) == 0 && conn->in_flight > 0)
        conn_abandon (conn);
      busy += conn->in_flight;
      fds[c].fd = nbd_aio_get_fd (conn->h);
      dir = nbd_aio_get_direction (conn->h);
      fds[c].events = (dir & LIBNBD_AIO_DIRECTION_READ ? POLLIN : 0) |
                      (dir & LIBNBD_AIO_DIRECTION_WRITE ? POLLOUT : 0);
      fds[c].revents = 0;
    }
    if (busy == 0 && !keep_issuing)
      return;
    if (poll (fds, nr_conns, 1000) == -1 && errno != EINTR) {
      perror ("poll");
      exit (2);
    }
    for (c = 0; c < nr_conns; ++c) {
      int r = 0;
      if (fds[c].revents & (POLLIN | POLLHUP | POLLERR))
        r = nbd_aio_notify_read (conns[c].h);
      else if (fds[c].revents & POLLOUT)
        r = nbd_aio_notify_write (conns[c].h);
      if (r == -1) {
        fprintf (stderr, "torture: connection %u: %s\n", c, nbd_get_error ());
        exit (2);
      }
    }
    if (now - last_compact > 4096) {
      model_compact (oldest_read ());
      last_compact = now;
    }
  }
}

/* After the run and with faults off: every byte must read as the model
 * allows, with nothing in flight.
 */
static void
final_check (void)
{
  struct conn *conn = &conns[0];
  uint64_t offset;

  for (offset = 0; offset < disk_size; offset += MAX_REQUEST) {
    struct request *req = calloc (1, sizeof *req);
    nbd_completion_callback cb = { .callback = completion_cb, .user_data = req };

    req->conn = conn;
    req->op = OP_READ;
    req->offset = offset;
    req->count = disk_size - offset < MAX_REQUEST ? disk_size - offset
                                                  : MAX_REQUEST;
    req->buf = malloc (req->count);
    req->issued = ++now;
    req->next = conn->requests;
    conn->requests = req;
    conn->in_flight++;
    if (nbd_aio_pread (conn->h, req->buf, req->count, offset, cb, 0) == -1) {
      fprintf (stderr, "torture: final read: %s\n", nbd_get_error ());
      exit (2);
    }
    run_loop (false, 0);
  }
}

static void
load_base (void)
{
  FILE *fp = fopen (base_file, "rb");

  if (fp == NULL) {
    perror (base_file);
    exit (2);
  }
  base = malloc (disk_size);
  if (base == NULL || fread (base, 1, disk_size, fp) != disk_size) {
    fprintf (stderr, "torture: %s: shorter than the disk\n", base_file);
    exit (2);
  }
  fclose (fp);
}

static void
usage (void)
{
  fprintf (stderr,
    "usage: torture [-c CONNS] [-q DEPTH] [-t SECONDS] [-b COW-BLOCK-SIZE]\n"
    "               [-s SEED] [--faults FILE] [--disconnect-every N]\n"
    "               [--enospc] [-Q]\n"
    "               BASE-FILE URI\n"
    "BASE-FILE holds what the export reads before any write.\n"
    "-b: the filter's cow-block-size (whole blocks of a trim read as zero);\n"
    "  default: the preferred block size the server advertises.\n"
    "--faults FILE: faults are injected while FILE exists; failed requests\n"
    "  are allowed, and FILE is removed before the final check.\n"
    "--disconnect-every N: about once per N loop turns per connection, hang\n"
    "  up with requests in flight and reconnect.\n"
    "--enospc: requests may fail with ENOSPC (cow-max-size), and then must\n"
    "  have changed nothing; they are counted as refused.\n");
  exit (2);
}

int
main (int argc, char *argv[])
{
  static const struct option long_options[] = {
    { "faults", required_argument, NULL, 'F' },
    { "disconnect-every", required_argument, NULL, 'D' },
    { "enospc", no_argument, NULL, 'E' },
    { NULL }
  };
  struct timespec ts;
  uint64_t total, failed = 0;
  double started, elapsed;
  unsigned c, o;
  int opt;

  seed = time (NULL) ^ getpid ();
  while ((opt = getopt_long (argc, argv, "c:q:t:b:s:Q", long_options, NULL))
         != -1) {
    switch (opt) {
    case 'c': nr_conns = atoi (optarg); break;
    case 'q': queue_depth = atoi (optarg); break;
    case 't': duration = atof (optarg); break;
    case 'b': block_size = strtoull (optarg, NULL, 0); break;
    case 's': seed = strtoul (optarg, NULL, 0); break;
    case 'F': faults_file = optarg; break;
    case 'D': disconnect_every = atoi (optarg); break;
    case 'E': enospc_expected = true; break;
    case 'Q': quiet = true; break;
    default: usage ();
    }
  }
  if (argc - optind != 2 || nr_conns == 0 || queue_depth == 0)
    usage ();
  base_file = argv[optind];
  uri = argv[optind + 1];
  rng_state = seed;

  conns = calloc (nr_conns, sizeof *conns);
  for (c = 0; c < nr_conns; ++c)
    conn_open (&conns[c]);
  disk_size = nbd_get_size (conns[0].h);
  /* The filter advertises cow-block-size as its preferred block size. */
  if (block_size == 0)
    block_size = nbd_get_block_size (conns[0].h, LIBNBD_SIZE_PREFERRED);
  if (block_size <= 0) {
    fprintf (stderr, "torture: no block size: give -b\n");
    exit (2);
  }
  load_base ();
  model_init ();

  clock_gettime (CLOCK_MONOTONIC, &ts);
  started = ts.tv_sec + ts.tv_nsec / 1e9;
  run_loop (true, started + duration);
  clock_gettime (CLOCK_MONOTONIC, &ts);
  elapsed = ts.tv_sec + ts.tv_nsec / 1e9 - started;

  if (faults_file)
    unlink (faults_file);
  final_check ();

  total = refused;
  for (o = 0; o < NR_OPS; ++o) {
    total += ops_done[o] + ops_failed[o];
    failed += ops_failed[o];
  }
  if (!quiet) {
    printf ("torture: seed %u, %u connections x depth %u, block size %" PRIu64
            ", disk %" PRIu64 " bytes, %.1f s\n",
            seed, nr_conns, queue_depth, block_size, disk_size, elapsed);
    for (o = 0; o < NR_OPS; ++o)
      printf ("  %-6s %10" PRIu64 " ok %8" PRIu64 " failed\n",
              op_name[o], ops_done[o], ops_failed[o]);
  }
  printf ("torture: %" PRIu64 " operations, %.0f ops/s, %" PRIu64
          " reads checked, %" PRIu64 " failed, %" PRIu64 " refused, %" PRIu64
          " disconnects, %" PRIu64 " mismatches\n",
          total, total / elapsed, reads_checked, failed, refused,
          disconnects, mismatches);

  for (c = 0; c < nr_conns; ++c) {
    nbd_shutdown (conns[c].h, 0);
    nbd_close (conns[c].h);
  }
  if (mismatches) {
    fprintf (stderr, "torture: FAILED; reproduce the request sequence with "
             "-s %u\n", seed);
    return 1;
  }
  if (failed && !faults_file && !disconnect_every) {
    fprintf (stderr, "torture: requests failed without faults injected\n");
    return 2;
  }
  return 0;
}
