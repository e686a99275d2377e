/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The system calls that move an overlay store's data (storeio.h). */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>

#include <nbdkit-filter.h>

#include "fullio.h"
#include "storeio.h"

/* Every pwrite into the overlay ends on a multiple of this many bytes
 * of its file.  The kernel sizes the page-cache folios a write creates
 * by the length of the write: one pwrite of 1M makes 1M folios, and on
 * a guest whose free memory the host takes back (docs/performance.md)
 * filling fresh high-order folios ran 10x slower than 128K ones, while
 * overwriting either ran alike.
 */
#define WRITE_PIECE (128 * 1024)

/* The source of writes of zeros where the file cannot zero ranges. */
static const char zero_buf[WRITE_PIECE];

/* Zeros of at most this many bytes (a page) are written, not
 * allocated: the page is written back whole anyway once the client's
 * write into it follows, and the space is reserved as surely (the
 * filesystem reserves it for a dirty page), but no extent of the file
 * is made for it until then.  An extent made at once for each small
 * block zeroed, apart from its neighbours, made the close of a
 * throw-away file at nbdkit's exit free thousands of them, one
 * discard each on a filesystem mounted with discard: a second per
 * file (tests/test-exit-discard.sh).
 */
#define SMALL_ZEROS 4096

int
storeio_write (int fd, const void *buf, uint64_t count, uint64_t at)
{
  const char *p = buf;

  if (buf == NULL && count > SMALL_ZEROS &&
      fallocate (fd, FALLOC_FL_ZERO_RANGE, at, count) == 0)
    return 0;
  while (count > 0) {
    uint64_t n = WRITE_PIECE - at % WRITE_PIECE;

    if (n > count)
      n = count;
    if (pwrite_full (fd, p ? p : zero_buf, n, at) == -1)
      return -1;
    if (p)
      p += n;
    at += n;
    count -= n;
  }
  return 0;
}

/* Requests the overlay's filesystem refused for want of room, the
 * server's: a client can cause them (filling the filesystem, writing
 * past the largest offset it holds), so each kind is logged once and
 * all are counted.  Atomic.
 */
static uint64_t room_refusals;
static bool full_logged, offset_logged;

void
storeio_report (const char *what, uint64_t count, uint64_t offset, int *err)
{
  bool *logged = errno == EFBIG ? &offset_logged : &full_logged;

  *err = errno;
  if (errno != ENOSPC && errno != EDQUOT && errno != EFBIG) {
    nbdkit_error ("cow: overlay %s of %" PRIu64 " bytes at offset %" PRIu64
                  ": %m", what, count, offset);
    return;
  }
  __atomic_add_fetch (&room_refusals, 1, __ATOMIC_RELAXED);
  if (__atomic_exchange_n (logged, true, __ATOMIC_RELAXED))
    nbdkit_debug ("cow: overlay %s of %" PRIu64 " bytes at offset %" PRIu64
                  ": %m", what, count, offset);
  else if (errno == EFBIG)
    nbdkit_error ("cow: overlay %s of %" PRIu64 " bytes at offset %" PRIu64
                  ": the filesystem of the overlay cannot hold this offset: "
                  "%m (logged once, cow-stats counts them)",
                  what, count, offset);
  else
    nbdkit_error ("cow: overlay %s of %" PRIu64 " bytes at offset %" PRIu64
                  ": %m: the overlay's filesystem is full (logged once, "
                  "cow-stats counts them)", what, count, offset);
}

uint64_t
storeio_room_refusals (void)
{
  return __atomic_load_n (&room_refusals, __ATOMIC_RELAXED);
}
