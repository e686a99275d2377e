/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The requests the filter sends to the plugin, cut to its stack's
 * block-size limits (baseio.h).
 */

#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <nbdkit-filter.h>

#include "baseio.h"
#include "basepool.h"
#include "checks.h"

/* Around every call into next but those nbdkit answers from its cache
 * (sizes and can_*): its call lock, if it has one (which the analysis
 * cannot follow: it sees the lock taken either way).
 */
static void
call_begin (const struct base_io *io) ACQUIRE (*io->call_lock) NO_TSA
{
  if (io->call_lock)
    held_lock (io->call_lock);
}

static void
call_end (const struct base_io *io) RELEASE (*io->call_lock) NO_TSA
{
  if (io->call_lock)
    held_unlock (io->call_lock);
}

/* The next request for [offset, end): block_limits_next. */
static uint64_t
next_request (const struct base_io *io, uint64_t offset, uint64_t end,
              uint64_t *req_offset, uint32_t *req_count)
{
  return block_limits_next (&io->limits, offset, end, io->size,
                            req_offset, req_count);
}

/* Reads [offset, offset+count) of the base in requests the stack
 * accepts: in place where they are exactly the bytes wanted, through
 * a buffer of one aligned unit at an unaligned end.  Kept out of
 * base_pread so that a read the stack takes whole costs the request
 * path no more than the call.
 */
static __attribute__ ((noinline)) int
pread_in_requests (const struct base_io *io, char *p, uint32_t count,
                   uint64_t offset, int *err)
{
  nbdkit_next *next = io->next;
  uint64_t end = offset + count, req_offset, n;
  uint32_t req_count;
  char *unit = NULL;
  int r = 0;

  while (r == 0 && offset < end) {
    n = next_request (io, offset, end, &req_offset, &req_count);
    if (req_offset == offset && req_count == n)
      r = next->pread (next, p, req_count, req_offset, 0, err);
    else {
      if (unit == NULL && (unit = malloc (io->limits.align)) == NULL) {
        *err = errno;
        nbdkit_error ("cow: malloc: %m");
        return -1;
      }
      r = next->pread (next, unit, req_count, req_offset, 0, err);
      if (r == 0)
        memcpy (p, unit + (offset - req_offset), n);
    }
    p += n;
    offset += n;
  }
  free (unit);
  return r;
}

/* blk_base.pread over a stack without limits. */
static int
base_pread_whole (void *opaque, void *buf, uint32_t count, uint64_t offset,
                  int *err)
{
  const struct base_io *io = opaque;

  return io->next->pread (io->next, buf, count, offset, 0, err);
}

/* blk_base.pread over a stack with limits: one request where it takes
 * the range whole.
 */
static int
base_pread (void *opaque, void *buf, uint32_t count, uint64_t offset,
            int *err)
{
  const struct base_io *io = opaque;

  if (block_limits_allow (&io->limits, offset, count, io->size))
    return io->next->pread (io->next, buf, count, offset, 0, err);
  return pread_in_requests (io, buf, count, offset, err);
}

/* blk_base.pread through a context whose calls are serialized. */
static int
base_pread_serialized (void *opaque, void *buf, uint32_t count,
                       uint64_t offset, int *err)
{
  const struct base_io *io = opaque;
  int r;

  call_begin (io);
  r = base_pread (opaque, buf, count, offset, err);
  call_end (io);
  return r;
}

/* The plugin's extents of the one request that begins to cover
 * [offset, end), in a list of their own, and the end of the request in
 * *req_end; NULL with *err set on failure.
 */
static struct nbdkit_extents *
request_extents (const struct base_io *io, uint64_t offset, uint64_t end,
                 uint32_t flags, uint64_t *req_end, int *err)
{
  nbdkit_next *next = io->next;
  struct nbdkit_extents *extents;
  uint64_t req_offset;
  uint32_t req_count;
  int r;

  next_request (io, offset, end, &req_offset, &req_count);
  /* Only a request starting at offset can stop after one extent. */
  if (req_offset != offset)
    flags &= ~NBDKIT_FLAG_REQ_ONE;
  *req_end = req_offset + req_count;
  extents = nbdkit_extents_new (req_offset, *req_end);
  if (extents == NULL) {
    *err = errno;
    return NULL;
  }
  call_begin (io);
  r = next->extents (next, req_count, req_offset, flags, extents, err);
  call_end (io);
  if (r == -1) {
    nbdkit_extents_free (extents);
    return NULL;
  }
  return extents;
}

/* Reports the plugin's extents of a request from offset to the block
 * layer's map of the base (blk_base.describe).
 */
static int
base_describe (void *opaque, uint32_t count, uint64_t offset,
               blk_found_run *found, void *found_opaque)
{
  const struct base_io *io = opaque;
  struct nbdkit_extents *extents;
  uint64_t req_end;
  size_t i;
  int err;

  if (io->next->can_extents (io->next) != 1)
    return -1;
  extents = request_extents (io, offset, offset + count, 0, &req_end, &err);
  if (extents == NULL)
    return -1;
  for (i = 0; i < nbdkit_extents_count (extents); ++i) {
    struct nbdkit_extent e = nbdkit_get_extent (extents, i);
    found (found_opaque, e.offset, e.length,
           (e.type & NBDKIT_EXTENT_ZERO) != 0);
  }
  nbdkit_extents_free (extents);
  return 0;
}

int
baseio_init (struct base_io *io, nbdkit_next *next, bool shared,
             mutex_t *call_lock)
{
  uint32_t minimum, preferred, maximum;
  int64_t size = next->get_size (next);

  if (size == -1 ||
      next->block_size (next, &minimum, &preferred, &maximum) == -1)
    return -1;
  io->next = next;
  io->alone = NULL;
  io->call_lock = call_lock;
  io->shared = shared;
  io->limits = block_limits_of (minimum, maximum);
  io->size = size;
  io->blk = (struct blk_base) { .pread = base_pread_whole,
                                .describe = base_describe,
                                .opaque = io };
  if (call_lock)
    io->blk.pread = base_pread_serialized;
  else if (!block_limits_none (&io->limits))
    io->blk.pread = base_pread;
  return 0;
}

/* blk_base.pread of a connection that stands alone. */
static int
base_pread_alone (void *opaque, void *buf, uint32_t count, uint64_t offset,
                  int *err)
{
  nbdkit_error ("cow: the export stands alone: no read of the plugin");
  *err = EIO;
  return -1;
}

void
baseio_init_alone (struct base_io *io, const struct base_facts *facts)
{
  *io = (struct base_io) {
    .alone = facts,
    .limits = block_limits_of (facts->answers.minimum,
                               facts->answers.maximum),
    .size = facts->size,
    .blk = { .pread = base_pread_alone, .opaque = io },
  };
}

struct base_facts *
baseio_facts_new (const struct base_io *io)
{
  struct base_facts *facts = calloc (1, sizeof *facts);
  struct kept_answers *a;
  const char *description;

  if (facts == NULL) {
    nbdkit_error ("cow: %m");
    return NULL;
  }
  facts->size = io->size;
  a = &facts->answers;
  if (baseio_block_size (io, &a->minimum, &a->preferred, &a->maximum) == -1 ||
      (a->can_cache = baseio_can_cache (io)) == -1 ||
      (a->is_rotational = baseio_is_rotational (io)) == -1) {
    baseio_facts_free (facts);
    return NULL;
  }
  description = baseio_export_description (io);
  if (description && (facts->description = strdup (description)) == NULL) {
    nbdkit_error ("cow: %m");
    baseio_facts_free (facts);
    return NULL;
  }
  return facts;
}

void
baseio_facts_free (struct base_facts *facts)
{
  if (facts == NULL)
    return;
  free (facts->description);
  free (facts);
}

bool
baseio_facts_to_kept (const struct base_facts *facts, struct kept_facts *kept)
{
  size_t len = facts->description ? strlen (facts->description) : 0;

  if (len > KEPT_DESCRIPTION_MAX)
    return false;
  memset (kept, 0, sizeof *kept);
  kept->known = true;
  kept->answers = facts->answers;
  kept->has_description = facts->description != NULL;
  memcpy (kept->description, facts->description ? facts->description : "",
          len + 1);
  return true;
}

struct base_facts *
baseio_facts_from_kept (const struct kept_facts *kept, uint64_t size)
{
  struct base_facts *facts = calloc (1, sizeof *facts);

  if (facts == NULL ||
      (kept->has_description &&
       (facts->description = strdup (kept->description)) == NULL)) {
    nbdkit_error ("cow: %m");
    baseio_facts_free (facts);
    return NULL;
  }
  facts->size = size;
  facts->answers = kept->answers;
  return facts;
}

int
baseio_block_size (const struct base_io *io, uint32_t *minimum,
                   uint32_t *preferred, uint32_t *maximum)
{
  if (io->alone) {
    *minimum = io->alone->answers.minimum;
    *preferred = io->alone->answers.preferred;
    *maximum = io->alone->answers.maximum;
    return 0;
  }
  return io->next->block_size (io->next, minimum, preferred, maximum);
}

int
baseio_can_cache (const struct base_io *io)
{
  if (io->alone)
    return io->alone->answers.can_cache;
  return io->next->can_cache (io->next);
}

int
baseio_is_rotational (const struct base_io *io)
{
  if (io->alone)
    return io->alone->answers.is_rotational;
  return io->next->is_rotational (io->next);
}

const char *
baseio_export_description (const struct base_io *io)
{
  const char *r;

  if (io->alone)
    return io->alone->description;
  call_begin (io);
  if (io->shared)
    r = basepool_export_description (io->next);
  else
    r = io->next->export_description (io->next);
  call_end (io);
  return r;
}

static int
add_extent (struct nbdkit_extents *extents,
            uint64_t offset, uint64_t length, uint32_t type, int *err)
{
  if (nbdkit_add_extent (extents, offset, length, type) == -1) {
    *err = errno;
    return -1;
  }
  return 0;
}

/* Adds the extents in found that lie in [*offset, end) to extents and
 * moves *offset past them.  found is a request's up to req_end (after
 * *offset): if it says nothing of *offset on (a plugin may answer for
 * a prefix only), the rest of the request is added as data, which is
 * always true, so that *offset moves on.
 */
static int
add_request_extents (struct nbdkit_extents *extents,
                     struct nbdkit_extents *found, uint64_t req_end,
                     uint64_t *offset, uint64_t end, int *err)
{
  uint64_t at = *offset;
  size_t i;

  for (i = 0; i < nbdkit_extents_count (found); ++i) {
    struct nbdkit_extent e = nbdkit_get_extent (found, i);
    uint64_t from = e.offset > at ? e.offset : at;
    uint64_t to = e.offset + e.length < end ? e.offset + e.length : end;

    if (from < to) {
      if (add_extent (extents, from, to - from, e.type, err) == -1)
        return -1;
      at = to;
    }
  }
  if (at == *offset) {
    at = req_end < end ? req_end : end;
    if (add_extent (extents, *offset, at - *offset, 0, err) == -1)
      return -1;
  }
  *offset = at;
  return 0;
}

int
baseio_extents (const struct base_io *io, uint32_t count, uint64_t offset,
                uint32_t flags, struct nbdkit_extents *extents, int *err)
{
  uint64_t end = offset + count, req_end;

  if (io->alone || io->next->can_extents (io->next) != 1)
    return add_extent (extents, offset, count, 0, err);
  while (offset < end) {
    struct nbdkit_extents *found = request_extents (io, offset, end, flags,
                                                    &req_end, err);
    int r;

    if (found == NULL)
      return -1;
    r = add_request_extents (extents, found, req_end, &offset, end, err);
    nbdkit_extents_free (found);
    if (r == -1)
      return -1;
    if (flags & NBDKIT_FLAG_REQ_ONE)
      break;
  }
  return 0;
}

int
baseio_cache (const struct base_io *io, uint32_t count, uint64_t offset,
              uint32_t flags, int *err)
{
  nbdkit_next *next = io->next;
  uint64_t end = offset + count, req_offset;
  uint32_t req_count;

  if (io->alone)                /* the overlay holds every block */
    return 0;
  while (offset < end) {
    offset += next_request (io, offset, end, &req_offset, &req_count);
    int r;

    call_begin (io);
    r = next->cache (next, req_count, req_offset, flags, err);
    call_end (io);
    if (r == -1)
      return -1;
  }
  return 0;
}
