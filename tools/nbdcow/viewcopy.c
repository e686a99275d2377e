/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The copy of nbdcow backup (viewcopy.h): a point-in-time view, or its
 * changes since a checkpoint, mapped by block status in clusters, and
 * its data clusters read by one thread per connection into their
 * places in the qcow2 file.
 */

#include <config.h>

#include <endian.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include "checks.h"
#include "clusterzip.h"
#include "commit.h"
#include "crc32c.h"
#include "divround.h"
#include "fullio.h"
#include "iszero.h"
#include "viewcopy.h"

/* A piece of work is at most this many bytes. */
#define PIECE_BYTES (4 * 1024 * 1024)

/* How often the progress is drawn, in ms. */
#define PROGRESS_MS 100

/* The map: each cluster in the file (KEPT_ALLOCATED), zero (KEPT_ZERO),
 * or left to PREV (KEPT_NOT_ALLOCATED).
 */

struct mapping {
  struct view_copy *vc;
  uint64_t end;                 /* of what the extents have covered */
  bool have_pending;            /* a cluster the extents cover in part */
  uint64_t pending;
  unsigned pending_state;
  int err;
};

/* The state of a run of the view: a standalone file need not hold
 * zeros; a hole without the zero flag in the changes is unchanged.
 */
static unsigned
extent_state (const struct view_copy *vc, uint32_t flags)
{
  if (flags & LIBNBD_STATE_ZERO)
    return vc->increment ? KEPT_ZERO : KEPT_NOT_ALLOCATED;
  if ((flags & LIBNBD_STATE_HOLE) && vc->increment)
    return KEPT_NOT_ALLOCATED;
  return KEPT_ALLOCATED;
}

static int
set_clusters (struct mapping *m, uint64_t c, uint64_t n, unsigned state)
{
  if (state != KEPT_NOT_ALLOCATED &&
      statemap_reserve (&m->vc->states, c, n) == -1) {
    m->err = errno;
    return -1;
  }
  statemap_set (&m->vc->states, c, n, state);
  return 0;
}

/* A cluster covered by runs of several states reads from the view. */
static int
add_to_pending (struct mapping *m, uint64_t c, unsigned state)
{
  if (m->have_pending && m->pending == c) {
    if (m->pending_state != state)
      m->pending_state = KEPT_ALLOCATED;
    return 0;
  }
  if (m->have_pending &&
      set_clusters (m, m->pending, 1, m->pending_state) == -1)
    return -1;
  m->have_pending = true;
  m->pending = c;
  m->pending_state = state;
  return 0;
}

/* Flushes the cluster pending, if any. */
static int
end_pending (struct mapping *m)
{
  if (!m->have_pending)
    return 0;
  m->have_pending = false;
  return set_clusters (m, m->pending, 1, m->pending_state);
}

static int
add_run (struct mapping *m, uint64_t offset, uint64_t length, unsigned state)
{
  const struct blockgeom *g = &m->vc->geom;
  uint64_t end = offset + length;

  while (offset < end) {
    uint64_t c = blockgeom_block (g, offset), whole_end;

    /* The clusters from c that the run covers whole. */
    whole_end = end == g->size ? blockgeom_blocks (g) : blockgeom_block (g, end);
    if (offset > blockgeom_start (g, c) || whole_end == c) {
      uint64_t stop = blockgeom_end (g, c) < end ? blockgeom_end (g, c) : end;

      if (add_to_pending (m, c, state) == -1)
        return -1;
      offset = stop;
      continue;
    }
    if (end_pending (m) == -1 || set_clusters (m, c, whole_end - c, state) == -1)
      return -1;
    offset = blockgeom_end (g, whole_end - 1);
  }
  return 0;
}

static int
extent_run (void *opaque, const char *context, uint64_t offset,
            uint32_t *entries, size_t n, int *error)
{
  struct mapping *m = opaque;
  size_t i;

  (void) error;
  if (strcmp (context, LIBNBD_CONTEXT_BASE_ALLOCATION) != 0 ||
      offset != m->end)
    return 0;
  for (i = 0; i + 1 < n && m->end < m->vc->geom.size; i += 2) {
    uint64_t length = entries[i];

    if (length > m->vc->geom.size - m->end)
      length = m->vc->geom.size - m->end;
    if (add_run (m, m->end, length, extent_state (m->vc, entries[i + 1])) == -1)
      return -1;
    m->end += length;
  }
  return 0;
}

/* With an increment's chain: leaves to it each data cluster of the run
 * of clusters [c, end) that reads as the chain does, and makes a zero
 * cluster of each that reads zeros, reading the view a piece at a time
 * into buf (PIECE_BYTES) and the chain's cluster into old.
 */
static int
leave_alike_run (struct view_copy *vc, uint64_t c, uint64_t end, char *buf,
                 char *old)
{
  uint64_t piece = PIECE_BYTES >> CLUSTER_BITS, i;

  for (; c < end; c += piece) {
    uint64_t n = end - c < piece ? end - c : piece;
    uint64_t offset = blockgeom_start (&vc->geom, c);
    uint64_t length = blockgeom_end (&vc->geom, c + n - 1) - offset;

    if (vc->stopped (vc->opaque))
      return -1;
    if (nbd_pread (vc->nbd[0], buf, length, offset, 0) == -1) {
      nbdcow_error ("%s: read of %" PRIu64 " bytes at %" PRIu64 ": %s",
                    vc->what, length, offset, nbd_get_error ());
      return -1;
    }
    for (i = 0; i < n; ++i) {
      uint64_t at = blockgeom_start (&vc->geom, c + i);
      uint32_t len = blockgeom_end (&vc->geom, c + i) - at;

      if (qcow2_chain_read (vc->prev, old, len, at) == -1)
        return -1;
      if (memcmp (buf + (at - offset), old, len) == 0)
        statemap_set (&vc->states, c + i, 1, KEPT_NOT_ALLOCATED);
      else if (is_zero (buf + (at - offset), len))
        statemap_set (&vc->states, c + i, 1, KEPT_ZERO);
    }
  }
  return 0;
}

/* leave_alike_run over every run of data clusters. */
static int
leave_alike (struct view_copy *vc)
{
  uint64_t blocks = blockgeom_blocks (&vc->geom), c, end;
  char *buf = malloc (PIECE_BYTES), *old = malloc (1 << CLUSTER_BITS);
  unsigned state;
  int r = 0;

  if (buf == NULL || old == NULL) {
    nbdcow_error ("%s: malloc: %m", vc->out);
    r = -1;
  }
  for (c = 0; r == 0 && c < blocks; c = end) {
    end = statemap_run (&vc->states, c, blocks, &state);
    if (state == KEPT_ALLOCATED)
      r = leave_alike_run (vc, c, end, buf, old);
  }
  free (buf);
  free (old);
  return r;
}

int
view_copy_map (struct view_copy *vc, uint64_t size)
{
  struct mapping m = { .vc = vc };

  vc->geom = blockgeom_make (UINT64_C (1) << CLUSTER_BITS, size);
  while (m.end < size && !vc->stopped (vc->opaque)) {
    uint64_t was = m.end;
    uint64_t count = size - m.end < (UINT64_C (1) << 30)
      ? size - m.end : (UINT64_C (1) << 30);

    if (nbd_block_status (vc->nbd[0], count, m.end,
                          (nbd_extent_callback) { .callback = extent_run,
                                                  .user_data = &m }, 0)
        == -1) {
      nbdcow_error ("%s: block status at %" PRIu64 ": %s", vc->what,
                    was, m.err ? strerror (m.err) : nbd_get_error ());
      return -1;
    }
    if (m.end == was) {
      nbdcow_error ("%s: block status at %" PRIu64 " answers nothing",
                    vc->what, was);
      return -1;
    }
  }
  if (end_pending (&m) == -1) {
    nbdcow_error ("%s: %s", vc->what, strerror (m.err));
    return -1;
  }
  if (m.end < size)
    return -1;
  return vc->prev ? leave_alike (vc) : 0;
}

int
view_copy_map_chain (struct view_copy *vc, uint64_t size)
{
  uint64_t c, blocks;
  int state;

  if (vc->from->cluster_bits != CLUSTER_BITS) {
    nbdcow_error ("%s: clusters of %u bytes, where nbdcow backup writes "
                  "them of %u", vc->what, 1u << vc->from->cluster_bits,
                  1u << CLUSTER_BITS);
    return -1;
  }
  vc->geom = blockgeom_make (UINT64_C (1) << CLUSTER_BITS, size);
  blocks = blockgeom_blocks (&vc->geom);
  for (c = 0; c < blocks; ++c) {
    if (vc->stopped (vc->opaque) ||
        (state = qcow2_chain_state (vc->from, c << CLUSTER_BITS)) == -1)
      return -1;
    if (state == KEPT_NOT_ALLOCATED)
      continue;
    if (statemap_reserve (&vc->states, c, 1) == -1) {
      nbdcow_error ("%s: malloc: %m", vc->out);
      return -1;
    }
    statemap_set (&vc->states, c, 1, state);
  }
  return 0;
}

/* The qcow2_source of the map. */
static int
map_block_runs (const void *disk, overlay_run_fn *fn, void *opaque)
{
  const struct view_copy *vc = disk;

  return each_state_run (&vc->geom, &vc->states, false, fn, opaque);
}

/* The overlay_run_fn that counts the bytes of data and zeros. */
static int
count_run (uint64_t offset, uint64_t length, unsigned state, void *opaque)
{
  struct view_copy *vc = opaque;

  (void) offset;
  if (state == KEPT_ALLOCATED)
    vc->data_bytes += length;
  else if (state == KEPT_ZERO)
    vc->zero_bytes += length;
  return 0;
}

/*----------------------------------------------------------------------
 * The copy: workers take pieces of the runs of data clusters from a
 * shared cursor, in order, and each reads its pieces from the view on
 * its own connection into their places in the file.
 */

struct worker {
  struct view_copy *vc;
  struct nbd_handle *h;
  pthread_t thread;
};

/* Takes the next piece of data clusters: sets *offset and *length (in
 * the disk) and *dest (in the file).  Returns false at the end or once
 * a worker has failed.
 */
static bool
take_piece (struct view_copy *vc, uint64_t *offset, uint64_t *length,
            uint64_t *dest)
{
  uint64_t blocks = blockgeom_blocks (&vc->geom);
  uint64_t piece = PIECE_BYTES >> CLUSTER_BITS;
  bool found = false;

  held_lock (&vc->lock);
  if (vc->stopped (vc->opaque))
    vc->failed = true;
  while (!vc->failed && vc->next_cluster < blocks) {
    uint64_t c = vc->next_cluster;
    unsigned state;
    uint64_t end = statemap_run (&vc->states, c, blocks, &state);

    vc->next_cluster = end;
    if (state != KEPT_ALLOCATED)
      continue;
    if (end - c > piece)
      vc->next_cluster = end = c + piece;
    *offset = blockgeom_start (&vc->geom, c);
    *length = blockgeom_end (&vc->geom, end - 1) - *offset;
    *dest = vc->next_data;
    vc->next_data += (end - c) << CLUSTER_BITS;
    found = true;
    break;
  }
  held_unlock (&vc->lock);
  return found;
}

/* Reads length bytes of the disk at offset into buf, from the view on
 * w's connection or from the chain.  Returns 0, or -1 after a message.
 */
static int
read_piece (struct worker *w, char *buf, uint64_t length, uint64_t offset)
{
  struct view_copy *vc = w->vc;

  if (vc->from)
    return qcow2_chain_read (vc->from, buf, length, offset);
  if (nbd_pread (w->h, buf, length, offset, 0) == 0)
    return 0;
  nbdcow_error ("%s: read of %" PRIu64 " bytes at %" PRIu64 ": %s",
                vc->what, length, offset, nbd_get_error ());
  return -1;
}

/* Notes the checksum of each cluster of the length bytes in buf that
 * go to dest in the file.
 */
static void
sum_piece (struct view_copy *vc, const char *buf, uint64_t length,
           uint64_t dest)
{
  uint64_t cluster = UINT64_C (1) << CLUSTER_BITS, at;
  uint64_t rank = (dest - vc->q.data_offset) >> CLUSTER_BITS;

  for (at = 0; at < length; at += cluster) {
    uint64_t n = length - at < cluster ? length - at : cluster;

    vc->sums[rank++] = htobe32 (crc32c (0, buf + at, n));
  }
}

/* The piece's n clusters of buf, compressed: cluster i's bytes at
 * zbuf + i clusters, their length in zlen[i] (0: stored as they are).
 * A piece at the disk's end is padded to a whole cluster with zeros,
 * as a qcow2 reader inflates a whole one.
 */
static void
compress_piece (char *buf, uint64_t length, char *zbuf, size_t *zlen)
{
  uint64_t cluster = UINT64_C (1) << CLUSTER_BITS;
  uint64_t n = div_round_up (length, cluster), i;

  memset (buf + length, 0, n * cluster - length);
  for (i = 0; i < n; ++i)
    zlen[i] = clusterzip_deflate (buf + i * cluster, cluster,
                                  zbuf + i * cluster, cluster - 1);
}

/* Buffers of a worker that packs: each cluster of a piece compressed
 * (compress_piece), where it goes, and the span of the file the piece
 * takes.
 */
struct packing {
  char *zbuf, *out;
  size_t *zlen;
  uint64_t *at;
  uint64_t start, end;
};

/* Places cluster i of a piece, of data rank rank, next in the packed
 * data: a compressed one right after the last, one stored as it is on
 * the next cluster boundary.  Sets its entry, the refcounts of the
 * clusters it takes, and p->at[i].  Caller holds vc->lock.
 */
static void
place_cluster (struct view_copy *vc, struct packing *p, uint64_t rank,
               uint64_t i) REQUIRES (vc->lock)
{
  uint64_t cluster = UINT64_C (1) << CLUSTER_BITS;
  uint64_t first = vc->q.data_offset >> CLUSTER_BITS, c;
  uint64_t bytes = p->zlen[i] ? p->zlen[i] : cluster, at;

  if (p->zlen[i] == 0)
    vc->next_packed = div_round_up (vc->next_packed, cluster) * cluster;
  at = p->at[i] = vc->next_packed;
  vc->packed.entries[rank] = p->zlen[i]
    ? qcow2_compressed_entry (&vc->q, at, p->zlen[i])
    : at | QCOW2_OFLAG_COPIED;
  for (c = at >> CLUSTER_BITS; c <= (at + bytes - 1) >> CLUSTER_BITS; ++c)
    vc->packed.refcounts[c - first]++;
  vc->next_packed += bytes;
}

/* Places the n clusters of a piece, of data ranks from rank on: the
 * compressed ones first, then those stored as they are, so that the
 * piece leaves at most one cluster's rest unused.  Caller holds
 * vc->lock.
 */
static void
place_piece (struct view_copy *vc, struct packing *p, uint64_t rank,
             uint64_t n) REQUIRES (vc->lock)
{
  uint64_t i;

  p->start = vc->next_packed;
  for (i = 0; i < n; ++i)
    if (p->zlen[i])
      place_cluster (vc, p, rank + i, i);
  for (i = 0; i < n; ++i)
    if (p->zlen[i] == 0)
      place_cluster (vc, p, rank + i, i);
  p->end = vc->next_packed;
}

/* Writes the piece's n clusters (buf, or compressed as compress_piece
 * left them in p) where place_piece put them, gathered in p->out, in
 * one write.  Returns 0, or -1 after a message.
 */
static int
write_packed (struct view_copy *vc, const struct packing *p,
              const char *buf, uint64_t n)
{
  uint64_t cluster = UINT64_C (1) << CLUSTER_BITS, i;

  memset (p->out, 0, p->end - p->start);
  for (i = 0; i < n; ++i)
    memcpy (p->out + (p->at[i] - p->start),
            (p->zlen[i] ? p->zbuf : buf) + i * cluster,
            p->zlen[i] ? p->zlen[i] : cluster);
  if (pwrite_full (vc->fd, p->out, p->end - p->start, p->start) == 0)
    return 0;
  nbdcow_error ("%s: write at %" PRIu64 ": %m", vc->out, p->start);
  return -1;
}

/* Compresses, places and writes a piece of length bytes in buf that
 * would go to dest were none packed.  Returns 0, or -1 after a
 * message.
 */
static int
pack_piece (struct view_copy *vc, struct packing *p, char *buf,
            uint64_t length, uint64_t dest)
{
  uint64_t rank = (dest - vc->q.data_offset) >> CLUSTER_BITS;
  uint64_t n = div_round_up (length, UINT64_C (1) << CLUSTER_BITS);

  compress_piece (buf, length, p->zbuf, p->zlen);
  held_lock (&vc->lock);
  place_piece (vc, p, rank, n);
  held_unlock (&vc->lock);
  return write_packed (vc, p, buf, n);
}

/* Writes a piece of length bytes in buf to dest, or packed.  Returns
 * 0, or -1 after a message.
 */
static int
write_piece (struct view_copy *vc, struct packing *p, char *buf,
             uint64_t length, uint64_t dest)
{
  sum_piece (vc, buf, length, dest);
  if (vc->compress)
    return pack_piece (vc, p, buf, length, dest);
  if (pwrite_full (vc->fd, buf, length, dest) == 0)
    return 0;
  nbdcow_error ("%s: write at %" PRIu64 ": %m", vc->out, dest);
  return -1;
}

static void *
worker_run (void *arg)
{
  struct worker *w = arg;
  struct view_copy *vc = w->vc;
  uint64_t per_piece = PIECE_BYTES >> CLUSTER_BITS;   /* clusters */
  char *buf = malloc (PIECE_BYTES);
  struct packing p = { NULL };
  uint64_t offset, length, dest;
  bool ok = buf != NULL;

  if (vc->compress) {
    p.zbuf = malloc (PIECE_BYTES);
    p.out = malloc (PIECE_BYTES + (UINT64_C (1) << CLUSTER_BITS));
    p.zlen = malloc (per_piece * sizeof *p.zlen);
    p.at = malloc (per_piece * sizeof *p.at);
    ok = ok && p.zbuf && p.out && p.zlen && p.at;
  }
  if (!ok)
    nbdcow_error ("%s: malloc: %m", vc->out);
  while (ok && take_piece (vc, &offset, &length, &dest)) {
    if (read_piece (w, buf, length, offset) == -1 ||
        write_piece (vc, &p, buf, length, dest) == -1)
      ok = false;
    else
      progress_add (&vc->bar, length);
  }
  free (buf);
  free (p.zbuf);
  free (p.out);
  free (p.zlen);
  free (p.at);
  held_lock (&vc->lock);
  if (!ok)
    vc->failed = true;
  held_unlock (&vc->lock);
  vc->finished++;
  return NULL;
}

/* Copies the data clusters into the file, a worker a connection. */
static int
copy_data (struct view_copy *vc)
{
  struct worker w[MAX_CONNECTIONS];
  struct timespec tick = { .tv_nsec = PROGRESS_MS * 1000000L };
  unsigned started, i;
  int err = 0;

  progress_init (&vc->bar, vc->progress, "backup", vc->data_bytes);
  pthread_mutex_init (&vc->lock, NULL);
  vc->next_data = vc->next_packed = vc->q.data_offset;
  for (started = 0; started < vc->handles; ++started) {
    w[started] = (struct worker) { .vc = vc,
                                   .h = vc->from ? NULL : vc->nbd[started] };
    err = pthread_create (&w[started].thread, NULL, worker_run, &w[started]);
    if (err != 0)
      break;
  }
  if (err != 0) {
    errno = err;
    nbdcow_error ("%s: pthread_create: %m", vc->out);
    held_lock (&vc->lock);
    vc->failed = true;
    held_unlock (&vc->lock);
  }
  while (vc->finished < started) {
    nanosleep (&tick, NULL);
    progress_show (&vc->bar);
  }
  for (i = 0; i < started; ++i)
    pthread_join (w[i].thread, NULL);
  held_lock (&vc->lock);
  vc->packed.clusters = div_round_up (vc->next_packed - vc->q.data_offset,
                                      UINT64_C (1) << CLUSTER_BITS);
  held_unlock (&vc->lock);
  progress_end (&vc->bar);
  pthread_mutex_destroy (&vc->lock);
  return vc->failed || started == 0 ? -1 : 0;
}

/* Sets *crc to the CRC-32C of the file's tables as written, from its
 * second cluster to its first data cluster.  Returns 0, or -1 after a
 * message.
 */
static int
crc_of_tables (struct view_copy *vc, uint32_t *crc)
{
  uint64_t from = UINT64_C (1) << CLUSTER_BITS, length;
  char *buf;
  int r = 0;

  length = vc->q.data_offset - from;
  buf = malloc (length ? length : 1);
  if (buf == NULL) {
    nbdcow_error ("%s: malloc: %m", vc->out);
    return -1;
  }
  if (pread_full (vc->fd, buf, length, from) == -1) {
    nbdcow_error ("%s: read at %" PRIu64 ": %m", vc->out, from);
    r = -1;
  }
  *crc = crc32c (0, buf, length);
  free (buf);
  return r;
}

/* The checksums' table of table_bytes, and with compress where the
 * data clusters go.  Returns 0, or -1 after a message.
 */
static int
alloc_tables (struct view_copy *vc, uint64_t table_bytes)
{
  uint64_t n = vc->q.data_clusters ? vc->q.data_clusters : 1;

  vc->sums = malloc (table_bytes ? table_bytes : 1);
  if (vc->compress) {
    vc->packed.entries = malloc (n * sizeof *vc->packed.entries);
    vc->packed.refcounts = calloc (n, sizeof *vc->packed.refcounts);
  }
  if (vc->sums && (!vc->compress ||
                   (vc->packed.entries && vc->packed.refcounts)))
    return 0;
  nbdcow_error ("%s: malloc: %m", vc->out);
  return -1;
}

int
view_copy_write (struct view_copy *vc, const char *backing,
                 struct qcow2_checkpoint *cp)
{
  struct qcow2_source src = { .geom = &vc->geom,
                              .each_block_run = map_block_runs, .disk = vc };
  struct qcow2_sums sums;
  uint64_t table_bytes;

  qcow2_plan (&src, &vc->q);
  if (vc->q.l1_entries > QCOW2_MAX_L1_ENTRIES) {
    nbdcow_error ("%s: a disk of %" PRIu64 " bytes needs a larger L1 table "
                  "than qemu reads", vc->what, vc->q.virtual_size);
    return -1;
  }
  map_block_runs (vc, count_run, vc);
  table_bytes = vc->q.data_clusters * sizeof *vc->sums;
  if (alloc_tables (vc, table_bytes) == -1 || copy_data (vc) == -1)
    return -1;
  if (vc->compress) {
    vc->q.clusters = (vc->q.data_offset >> CLUSTER_BITS) + vc->packed.clusters;
    src.packed = &vc->packed;
  }
  sums = (struct qcow2_sums) {
    .offset = vc->q.clusters << CLUSTER_BITS,
    .first_cluster = vc->q.data_offset >> CLUSTER_BITS,
    .count = vc->q.data_clusters,
    .flags = vc->compress ? QCOW2_SUMS_PACKED : 0,
  };
  if (vc->base_identity)
    strcpy (sums.base_identity, vc->base_identity);
  cp->disk_size = vc->geom.size;
  cp->file_length = sums.offset + (div_round_up (table_bytes,
                                                 UINT64_C (1) << CLUSTER_BITS)
                                   << CLUSTER_BITS);
  if (ftruncate (vc->fd, cp->file_length) == -1) {
    nbdcow_error ("%s: ftruncate: %m", vc->out);
    return -1;
  }
  if (qcow2_write_tables (&vc->q, &src, vc->fd, vc->out) == -1)
    return -1;
  sums.crc = crc32c (0, vc->sums, table_bytes);
  if (crc_of_tables (vc, &sums.tables_crc) == -1)
    return -1;
  if (pwrite_full (vc->fd, vc->sums, table_bytes, sums.offset) == -1) {
    nbdcow_error ("%s: write at %" PRIu64 ": %m", vc->out, sums.offset);
    return -1;
  }
  if (fdatasync (vc->fd) == -1) {
    nbdcow_error ("%s: fdatasync: %m", vc->out);
    return -1;
  }
  if (qcow2_write_header (&vc->q, vc->fd, vc->out, backing,
                          backing ? "qcow2" : NULL, cp, &sums) == -1)
    return -1;
  if (fdatasync (vc->fd) == -1) {
    nbdcow_error ("%s: fdatasync: %m", vc->out);
    return -1;
  }
  return 0;
}

void
view_copy_free (struct view_copy *vc)
{
  free (vc->sums);
  free (vc->packed.entries);
  free (vc->packed.refcounts);
  statemap_free (&vc->states);
}
