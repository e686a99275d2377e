/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The system calls that move an overlay store's data (storeio.h). */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sys/stat.h>

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

int
storeio_write (int fd, const void *buf, uint64_t count, uint64_t at)
{
  const char *p = buf;

  if (buf == NULL && fallocate (fd, FALLOC_FL_ZERO_RANGE, at, count) == 0)
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

void
storeio_report (const char *what, uint64_t count, uint64_t offset, int *err)
{
  *err = errno;
  if (errno == EFBIG)
    nbdkit_error ("cow: overlay %s of %" PRIu64 " bytes at offset %" PRIu64
                  ": the filesystem of the overlay (in $TMPDIR) cannot hold "
                  "this offset: %m", what, count, offset);
  else
    nbdkit_error ("cow: overlay %s of %" PRIu64 " bytes at offset %" PRIu64
                  ": %m", what, count, offset);
}

uint64_t
storeio_bytes (int fd)
{
  struct stat st;

  if (fstat (fd, &st) == -1)
    return 0;
  return (uint64_t) st.st_blocks * 512;
}
