/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The block layer's reads of the base (blk.h, struct blk_base): every
 * one counted, and the clients' told apart from the background's, for
 * the fill to give way to.  The lowest of the layer's files: it calls
 * none of the others.
 */

#include <config.h>

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "blk.h"
#include "blkpriv.h"

/* The clients' reads of any base started and ended, for the fill to
 * give way to (atomic, wrapping).
 */
static unsigned client_reads_started, client_reads_ended;

int
blk_base_read (struct blk *blk, const struct blk_base *base, void *buf,
               uint32_t len, uint64_t offset, int *err)
{
  int r;

  stat_add (blk, BASE_READS, 1);
  stat_add (blk, BASE_READ_BYTES, len);
  if (base->background_bytes) {
    *base->background_bytes += len;
    return base->pread (base->opaque, buf, len, offset, err);
  }
  __atomic_add_fetch (&client_reads_started, 1, __ATOMIC_RELAXED);
  r = base->pread (base->opaque, buf, len, offset, err);
  __atomic_add_fetch (&client_reads_ended, 1, __ATOMIC_RELAXED);
  return r;
}

unsigned
blk_client_base_reads (void)
{
  return __atomic_load_n (&client_reads_started, __ATOMIC_RELAXED);
}

bool
blk_client_base_reads_under_way (void)
{
  /* A read that starts or ends between the loads is seen next time. */
  return __atomic_load_n (&client_reads_started, __ATOMIC_RELAXED) !=
    __atomic_load_n (&client_reads_ended, __ATOMIC_RELAXED);
}

/* The runs of the base that read as zeros in a range the fill reads,
 * as far as HOLES_MAX of them, in order, as describe tells them.
 */
#define HOLES_MAX 32
struct holes {
  uint64_t from, to;            /* the range asked about */
  unsigned n;
  uint64_t start[HOLES_MAX], end[HOLES_MAX];
};

/* The blk_found_run of blk_base_read_data: notes the runs of zeros inside
 * the range, joining those that touch.
 */
static void
note_hole (void *opaque, uint64_t offset, uint64_t length, bool zero)
{
  struct holes *h = opaque;
  uint64_t start = offset > h->from ? offset : h->from;
  uint64_t end = offset + length < h->to ? offset + length : h->to;

  if (!zero || start >= end)
    return;
  if (h->n > 0 && h->end[h->n - 1] == start)
    h->end[h->n - 1] = end;
  else if (h->n < HOLES_MAX) {
    h->start[h->n] = start;
    h->end[h->n++] = end;
  }
}

int
blk_base_read_data (struct blk *blk, const struct blk_base *base, char *buf,
                    uint32_t len, uint64_t offset, int *err)
{
  struct holes h = { .from = offset, .to = offset + len, .n = 0 };
  uint64_t at = offset;
  unsigned i;

  if (base->describe == NULL ||
      base->describe (base->opaque, len, offset, note_hole, &h) == -1)
    h.n = 0;
  for (i = 0; i <= h.n; ++i) {
    uint64_t data_end = i < h.n ? h.start[i] : offset + len;

    if (data_end > at &&
        blk_base_read (blk, base, buf + (at - offset), data_end - at, at,
                       err) == -1)
      return -1;
    if (i == h.n)
      break;
    memset (buf + (h.start[i] - offset), 0, h.end[i] - h.start[i]);
    at = h.end[i];
  }
  return 0;
}
