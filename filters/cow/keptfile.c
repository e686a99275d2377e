/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The file of a kept overlay: docs/overlay-format.md is the format and
 * the argument for crash safety, kept.c the header's bytes.
 */

#include <config.h>

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirpath.h"
#include "divround.h"
#include "fullio.h"
#include "iszero.h"
#include "keptfile.h"
#include "punch.h"

/* State pages read or written per system call (and per round of a
 * flush): 1 MiB.
 */
#define PAGES_PER_IO 256

/* The header's fields that change after creation (version, checksum,
 * flags, recoveries) all lie in its first sector.
 */
#define HEADER_SECTOR 512

/* Sets kf->why to "PATH: " and the message, keeping errno. */
static int __attribute__ ((format (printf, 3, 4)))
fail (struct keptfile *kf, bool damaged, const char *fmt, ...)
{
  int saved = errno;
  size_t n;
  va_list ap;

  snprintf (kf->why, sizeof kf->why, "%s: ", kf->path ? kf->path : "");
  n = strlen (kf->why);
  errno = saved;
  va_start (ap, fmt);
  vsnprintf (kf->why + n, sizeof kf->why - n, fmt, ap);
  va_end (ap);
  kf->damaged = damaged;
  errno = saved;
  return -1;
}

uint64_t
keptfile_blocks (const struct keptfile *kf)
{
  const struct kept_layout *l = &kf->header.layout;

  return div_round_up (l->base_size, l->block_size);
}

static int
read_header (struct keptfile *kf)
{
  uint8_t *buf = malloc (KEPT_HEADER_SIZE);
  const char *why;
  enum kept_bad bad;
  ssize_t r;

  if (buf == NULL)
    return fail (kf, false, "malloc: %m");
  r = pread (kf->fd, buf, KEPT_HEADER_SIZE, 0);
  if (r == -1) {
    free (buf);
    return fail (kf, false, "read: %m");
  }
  if (r < KEPT_HEADER_SIZE) {
    /* A cut-off overlay still starts with the magic. */
    bool ours = r >= 8 && memcmp (buf, "nbdkCOW\n", 8) == 0;
    free (buf);
    return fail (kf, ours, ours ? "not a cow overlay (truncated header)"
                 : "not a cow overlay (bad magic)");
  }
  bad = kept_header_decode (buf, &kf->header, &why);
  free (buf);
  if (bad != KEPT_SOUND)
    return fail (kf, bad == KEPT_DAMAGED, "%s", why);
  kf->has_header = true;
  return 0;
}

/* The checks of keptfile_open once the file is open. */
static int
lock_and_read (struct keptfile *kf, enum keptfile_mode mode)
{
  struct stat st;

  /* The lock dies with the descriptor, so with the process too. */
  if (flock (kf->fd, (mode == KEPTFILE_READ ? LOCK_SH : LOCK_EX) | LOCK_NB)
      == -1) {
    if (errno == EWOULDBLOCK)
      return fail (kf, false,
                   "in use: locked by another process (nbdkit or nbdcow)");
    return fail (kf, false, "flock: %m");
  }
  if (fstat (kf->fd, &st) == -1)
    return fail (kf, false, "fstat: %m");
  if (!S_ISREG (st.st_mode))
    return fail (kf, false, "not a regular file");
  /* An empty file is a new overlay, laid out once the size is known. */
  if (st.st_size == 0) {
    if (mode == KEPTFILE_CREATE)
      return 0;
    return fail (kf, false, "empty: not a cow overlay (yet)");
  }
  return read_header (kf);
}

int
keptfile_open (struct keptfile *kf, const char *path, enum keptfile_mode mode)
{
  int flags = mode == KEPTFILE_READ ? O_RDONLY : O_RDWR;

  memset (kf, 0, sizeof *kf);
  kf->fd = -1;
  kf->path = strdup (path);
  if (kf->path == NULL)
    return fail (kf, false, "strdup: %m");
  if (mode == KEPTFILE_CREATE)
    flags |= O_CREAT;
  kf->fd = open (path, flags | O_CLOEXEC, 0600);
  if (kf->fd == -1 || lock_and_read (kf, mode) == -1) {
    if (kf->fd == -1)
      fail (kf, false, "%m");
    keptfile_close (kf);
    return -1;
  }
  return 0;
}

void
keptfile_close (struct keptfile *kf)
{
  if (kf->fd >= 0)
    close (kf->fd);
  kf->fd = -1;
  free (kf->path);
  kf->path = NULL;
}

int
keptfile_create (struct keptfile *kf, uint32_t block_size,
                 uint64_t base_size, const char *name)
{
  struct kept_header *h = &kf->header;
  uint8_t *buf;
  int r;

  if (strlen (name) > KEPT_NAME_MAX)
    return fail (kf, false, "export name longer than %d bytes", KEPT_NAME_MAX);
  buf = malloc (KEPT_HEADER_SIZE);
  if (buf == NULL)
    return fail (kf, false, "malloc: %m");
  kept_layout (KEPT_VERSION, block_size, base_size, &h->layout);
  h->version = KEPT_VERSION;
  h->flags = KEPT_OPEN;
  h->recoveries = 0;
  strcpy (h->name, name);
  kept_header_encode (h, buf);
  r = ftruncate (kf->fd, keptfile_min_length (kf));
  if (r == 0)
    r = fsync (kf->fd);
  if (r == 0)
    r = pwrite_full (kf->fd, buf, KEPT_HEADER_SIZE, 0);
  if (r == 0)
    r = fsync (kf->fd);
  if (r == 0)
    r = sync_dir_of (kf->path);
  free (buf);
  if (r == -1)
    return fail (kf, false, "cannot create the overlay: %m");
  kf->has_header = true;
  return 0;
}

uint64_t
keptfile_min_length (const struct keptfile *kf)
{
  const struct kept_layout *l = &kf->header.layout;

  return l->data_offset + (l->packed ? 0 : l->base_size);
}

int
keptfile_check_length (struct keptfile *kf)
{
  struct stat st;

  if (fstat (kf->fd, &st) == -1)
    return fail (kf, false, "fstat: %m");
  if ((uint64_t) st.st_size < keptfile_min_length (kf))
    return fail (kf, true, "truncated: shorter than its header says "
                 "(%" PRIu64 " bytes, not %" PRIu64 ")",
                 (uint64_t) st.st_size, keptfile_min_length (kf));
  return 0;
}

/* The bytes of block b: the last block of a base whose size is not a
 * multiple of the block size is short.
 */
static uint64_t
block_length (const struct kept_layout *l, uint64_t b)
{
  uint64_t start = b * l->block_size;

  return l->base_size - start < l->block_size ? l->base_size - start
                                              : l->block_size;
}

/* Block states of value 3 in the packed bytes buf[0..len), which no
 * state has.  Sets *first to the block of the first, counted from the
 * block of buf[0].
 */
static uint64_t
count_bad_states (const uint8_t *buf, uint64_t len, uint64_t *first)
{
  uint64_t i, bad = 0;

  for (i = 0; i < len; ++i) {
    unsigned both = buf[i] & (buf[i] >> 1) & 0x55;
    if (both == 0)
      continue;
    if (bad == 0)
      *first = 4 * i + __builtin_ctz (both) / 2;
    bad += __builtin_popcount (both);
  }
  return bad;
}

/* A chunk of an unpacked state area, len bytes from byte at of it. */
static int
load_unpacked (struct keptfile *kf, const uint8_t *buf, uint64_t at,
               uint64_t len, struct statemap *states, uint64_t *bad_blocks)
{
  uint64_t first_bad = 0, bad = count_bad_states (buf, len, &first_bad);

  if (bad && bad_blocks == NULL)
    return fail (kf, true, "corrupted block states (block %" PRIu64
                 " has the invalid state 3)", 4 * at + first_bad);
  if (bad_blocks)
    *bad_blocks += bad;
  if (!is_zero ((const char *) buf, len) &&
      statemap_import (states, 4 * at, 4 * len, buf) == -1)
    return fail (kf, false, "cannot load the block states: %m");
  return 0;
}

/* Gives allocated block b of a packed file its slot, checking that the
 * slot is the block's alone and lies within the file.  Returns 0, 1 if
 * the entry is bad, or -1 after fail().
 */
static int
load_slot (struct keptfile *kf, struct keptslots *slots, uint64_t b,
           uint64_t slot, uint64_t file_length, bool counting)
{
  const struct kept_layout *l = &kf->header.layout;
  uint64_t end = l->data_offset + slot * l->block_size + block_length (l, b);
  int r;

  if (end > file_length) {
    if (counting)
      return 1;
    return fail (kf, true, "corrupted block states or truncated file "
                 "(block %" PRIu64 " is in slot %" PRIu64 ", past the end "
                 "of the file)", b, slot);
  }
  r = keptslots_assign (slots, b, slot);
  if (r == -1)
    return fail (kf, false, "cannot load the block slots: %m");
  if (r == 1 && !counting)
    return fail (kf, true, "corrupted block states (block %" PRIu64
                 " is in slot %" PRIu64 ", which another block has)",
                 b, slot);
  return r;
}

/* A chunk of a packed state area: entries of blocks [first, first +
 * n).  A bad entry is counted in *bad_blocks and loaded as state 3, or
 * fails the load if bad_blocks is NULL.
 */
static int
load_packed (struct keptfile *kf, const uint8_t *buf, uint64_t first,
             uint64_t n, uint64_t file_length, struct statemap *states,
             struct keptslots *slots, uint64_t *bad_blocks)
{
  uint64_t i;

  for (i = 0; i < n; ++i) {
    uint64_t b = first + i;
    uint32_t entry;
    unsigned state = KEPT_ZERO;
    int r = 0;

    memcpy (&entry, buf + 4 * i, 4);
    entry = le32toh (entry);
    if (entry == KEPT_ENTRY_BASE)
      continue;
    if (entry >= KEPT_ENTRY_SLOT) {
      state = KEPT_ALLOCATED;
      r = load_slot (kf, slots, b, entry - KEPT_ENTRY_SLOT, file_length,
                     bad_blocks != NULL);
      if (r == -1)
        return -1;
      if (r == 1) {
        state = 3;
        ++*bad_blocks;
      }
    }
    if (statemap_reserve (states, b, 1) == -1)
      return fail (kf, false, "cannot load the block states: %m");
    statemap_set (states, b, 1, state);
  }
  return 0;
}

int
keptfile_load_states (struct keptfile *kf, struct statemap *states,
                      struct keptslots *slots, uint64_t *bad_blocks)
{
  const struct kept_layout *l = &kf->header.layout;
  uint64_t chunk = PAGES_PER_IO * KEPT_STATE_PAGE, at, blocks;
  uint8_t *buf;
  struct stat st;
  int r = 0;

  if (bad_blocks)
    *bad_blocks = 0;
  if (fstat (kf->fd, &st) == -1)
    return fail (kf, false, "fstat: %m");
  blocks = keptfile_blocks (kf);
  if (l->packed && keptslots_init (slots, blocks) == -1)
    return fail (kf, false, "cannot load the block slots: %m");
  buf = malloc (chunk);
  if (buf == NULL)
    return fail (kf, false, "malloc: %m");
  for (at = 0; at < l->states_length && r == 0; at += chunk) {
    uint64_t len = l->states_length - at < chunk ? l->states_length - at : chunk;
    uint64_t first = at / 4, n = len / 4;

    if (pread_full (kf->fd, buf, len, l->states_offset + at) == -1)
      r = fail (kf, false, "cannot read the block states: %m");
    else if (!l->packed)
      r = load_unpacked (kf, buf, at, len, states, bad_blocks);
    else if (first < blocks && !is_zero ((const char *) buf, len))
      r = load_packed (kf, buf, first, first + n > blocks ? blocks - first : n,
                       st.st_size, states, slots, bad_blocks);
  }
  free (buf);
  return r;
}

void
keptfile_export_page (const struct keptfile *kf, const struct statemap *states,
                      const struct keptslots *slots, uint64_t page,
                      uint8_t *buf)
{
  const struct kept_layout *l = &kf->header.layout;
  uint64_t first = page * l->blocks_per_page, i;

  if (!l->packed) {
    statemap_export (states, first, l->blocks_per_page, buf);
    return;
  }
  for (i = 0; i < l->blocks_per_page; ++i) {
    uint64_t b = first + i, slot;
    uint32_t entry = KEPT_ENTRY_BASE;

    switch (statemap_get (states, b)) {
    case KEPT_ZERO:
      entry = KEPT_ENTRY_ZERO;
      break;
    case KEPT_ALLOCATED:
      /* An allocated block always has its slot. */
      if (keptslots_get (slots, b, &slot))
        entry = slot + KEPT_ENTRY_SLOT;
      break;
    }
    entry = htole32 (entry);
    memcpy (buf + 4 * i, &entry, 4);
  }
}

/* What each_unused_range calls for a range [from, to) of the data
 * area (offsets from data_offset).
 */
typedef int unused_range_fn (struct keptfile *kf, uint64_t from, uint64_t to,
                             void *opaque);

/* Unpacked: fn for the runs of blocks that states does not hold
 * allocated.
 */
static int
each_unallocated_run (struct keptfile *kf, const struct statemap *states,
                      unused_range_fn *fn, void *opaque)
{
  const struct kept_layout *l = &kf->header.layout;
  uint64_t blocks = keptfile_blocks (kf), b = 0;

  while (b < blocks) {
    unsigned state;
    uint64_t end = statemap_run (states, b, blocks, &state);
    uint64_t to = end * l->block_size;

    if (state != KEPT_ALLOCATED &&
        fn (kf, b * l->block_size, to < l->base_size ? to : l->base_size,
            opaque) == -1)
      return -1;
    b = end;
  }
  return 0;
}

/* Packed: fn for the runs of slots not taken, then for whatever the
 * file holds past the last slot taken.
 */
static int
each_free_slot_run (struct keptfile *kf, const struct keptslots *slots,
                    unused_range_fn *fn, void *opaque)
{
  const struct kept_layout *l = &kf->header.layout;
  uint64_t end = keptslots_end (slots), s = 0;
  struct stat st;

  while (s < end) {
    uint64_t t = s;

    while (t < end && !keptslots_is_taken (slots, t))
      t++;
    if (t > s && fn (kf, s * l->block_size, t * l->block_size, opaque) == -1)
      return -1;
    s = t + 1;                  /* t is taken, or the end */
  }
  if (fstat (kf->fd, &st) == -1)
    return fail (kf, false, "fstat: %m");
  if ((uint64_t) st.st_size > l->data_offset + end * l->block_size)
    return fn (kf, end * l->block_size, st.st_size - l->data_offset, opaque);
  return 0;
}

/* Calls fn for each range of the data area that holds no block of the
 * overlay, stopping at the first that returns -1.
 */
static int
each_unused_range (struct keptfile *kf, const struct statemap *states,
                   const struct keptslots *slots, unused_range_fn *fn,
                   void *opaque)
{
  if (kf->header.layout.packed)
    return each_free_slot_run (kf, slots, fn, opaque);
  return each_unallocated_run (kf, states, fn, opaque);
}

/* Cuts the file to length bytes if it is longer.  Callers take it as
 * best effort, as punch_run: a longer file only keeps the space.
 */
static int
shorten (struct keptfile *kf, uint64_t length)
{
  struct stat st;

  if (fstat (kf->fd, &st) == -1 || (uint64_t) st.st_size <= length)
    return 0;
  return ftruncate (kf->fd, length);
}

static int
punch_run (struct keptfile *kf, uint64_t from, uint64_t to, void *opaque)
{
  /* Best effort: a filesystem without holes only keeps the space. */
  punch_hole (kf->fd, kf->header.layout.data_offset + from, to - from);
  return 0;
}

void
keptfile_punch_unallocated (struct keptfile *kf, const struct statemap *states,
                            const struct keptslots *slots)
{
  keptfile_cut (kf, slots);
  each_unused_range (kf, states, slots, punch_run, NULL);
}

void
keptfile_cut (struct keptfile *kf, const struct keptslots *slots)
{
  const struct kept_layout *l = &kf->header.layout;

  if (l->packed)
    shorten (kf, l->data_offset + keptslots_end (slots) * l->block_size);
}

/* Adds to *opaque the bytes of [from, to) of the data area that hold
 * data on disk, as lseek's SEEK_DATA and SEEK_HOLE find them.
 */
static int
count_data_run (struct keptfile *kf, uint64_t from, uint64_t to, void *opaque)
{
  uint64_t *bytes = opaque;
  off_t base = kf->header.layout.data_offset, at = base + from;
  off_t end = base + to;

  while (at < end) {
    off_t data = lseek (kf->fd, at, SEEK_DATA), hole;
    if (data == -1 && errno == ENXIO)
      return 0;
    if (data == -1)
      return fail (kf, false, "lseek: %m");
    if (data >= end)
      return 0;
    hole = lseek (kf->fd, data, SEEK_HOLE);
    if (hole == -1)
      return fail (kf, false, "lseek: %m");
    *bytes += (hole < end ? hole : end) - data;
    at = hole;
  }
  return 0;
}

int
keptfile_leaked_bytes (struct keptfile *kf, const struct statemap *states,
                       const struct keptslots *slots, uint64_t *bytes)
{
  *bytes = 0;
  return each_unused_range (kf, states, slots, count_data_run, bytes);
}

int
keptfile_set_flags (struct keptfile *kf, uint32_t flags, uint32_t recoveries)
{
  uint8_t *buf = malloc (KEPT_HEADER_SIZE);
  int r;

  if (buf == NULL)
    return fail (kf, false, "malloc: %m");
  /* Version 1 had no flags: its files become version 2. */
  if (kf->header.version < 2)
    kf->header.version = 2;
  kf->header.flags = flags;
  kf->header.recoveries = recoveries;
  kept_header_encode (&kf->header, buf);
  r = pwrite_full (kf->fd, buf, HEADER_SECTOR, 0);
  if (r == 0)
    r = fdatasync (kf->fd);
  free (buf);
  if (r == -1)
    return fail (kf, false, "cannot write the header: %m");
  return 0;
}

/* Writes n state pages from buf and makes them durable. */
static int
write_state_pages (struct keptfile *kf, const uint64_t *pages,
                   const uint8_t *buf, unsigned n)
{
  const struct kept_layout *l = &kf->header.layout;
  unsigned i;

  for (i = 0; i < n; ++i)
    if (pwrite_full (kf->fd, buf + i * KEPT_STATE_PAGE, KEPT_STATE_PAGE,
                     l->states_offset + pages[i] * KEPT_STATE_PAGE) == -1)
      return -1;
  return fdatasync (kf->fd);
}

/* Each round: take the states of some dirty pages, sync the data they
 * point to, then write and sync the pages.  States taken before the
 * data sync only ever name data written before it.  Even with nothing
 * dirty the data is synced: writes into allocated blocks change no
 * state.
 */
int
keptfile_flush (struct keptfile *kf, keptfile_take_pages *take,
                keptfile_redirty_pages *redirty, void *opaque)
{
  uint64_t *pages = malloc (PAGES_PER_IO * sizeof *pages), next = 0;
  uint8_t *buf = malloc (PAGES_PER_IO * KEPT_STATE_PAGE);
  unsigned n;
  int r = 0;

  if (pages == NULL || buf == NULL) {
    r = fail (kf, false, "malloc: %m");
    goto out;
  }
  do {
    n = take (opaque, &next, pages, buf, PAGES_PER_IO);
    if (fdatasync (kf->fd) == -1 ||
        write_state_pages (kf, pages, buf, n) == -1) {
      r = fail (kf, false, "flush: %m");
      redirty (opaque, pages, n);
      break;
    }
  } while (n == PAGES_PER_IO);
 out:
  free (pages);
  free (buf);
  return r;
}

int
keptfile_empty (struct keptfile *kf)
{
  const struct kept_layout *l = &kf->header.layout;
  uint64_t chunk = PAGES_PER_IO * KEPT_STATE_PAGE, at;
  uint8_t *buf = malloc (chunk), *zero = calloc (1, chunk);
  int r = 0;

  if (buf == NULL || zero == NULL)
    r = fail (kf, false, "malloc: %m");
  /* Only the pages holding states are rewritten: a sparse state area
   * stays sparse.
   */
  for (at = 0; r == 0 && at < l->states_length; at += chunk) {
    uint64_t len = l->states_length - at < chunk ? l->states_length - at : chunk;
    uint64_t off = l->states_offset + at;

    if (pread_full (kf->fd, buf, len, off) == -1)
      r = fail (kf, false, "cannot read the block states: %m");
    else if (!is_zero ((const char *) buf, len) &&
             pwrite_full (kf->fd, zero, len, off) == -1)
      r = fail (kf, false, "cannot write the block states: %m");
  }
  if (r == 0 && fdatasync (kf->fd) == -1)
    r = fail (kf, false, "fdatasync: %m");
  /* Packed, the data area goes whole, its few extents with it. */
  if (r == 0 && l->packed)
    shorten (kf, l->data_offset);
  else if (r == 0)
    punch_run (kf, 0, l->base_size, NULL);
  free (buf);
  free (zero);
  return r;
}

uint64_t
keptfile_data_run (const struct keptfile *kf, const struct keptslots *slots,
                   uint64_t b, uint64_t n, uint64_t *at)
{
  const struct kept_layout *l = &kf->header.layout;
  uint64_t slot, next, i;

  if (!l->packed) {
    *at = l->data_offset + b * l->block_size;
    return n;
  }
  if (!keptslots_get (slots, b, &slot))
    return 0;
  *at = l->data_offset + slot * l->block_size;
  for (i = 1; i < n; ++i)
    if (!keptslots_get (slots, b + i, &next) || next != slot + i)
      break;
  return i;
}

uint64_t
keptfile_bytes_on_disk (struct keptfile *kf)
{
  struct stat st;

  if (fstat (kf->fd, &st) == -1)
    return 0;
  return (uint64_t) st.st_blocks * 512;
}
