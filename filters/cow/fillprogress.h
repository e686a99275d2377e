/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The progress of an overlay's fill (cow-fill): what the fill's
 * threads write and the statistics read, each field on its own.
 */

#ifndef COW_FILLPROGRESS_H
#define COW_FILLPROGRESS_H

#include <stdint.h>

enum fill_state {
  FILL_WAITING,                 /* no handle of the plugin yet */
  FILL_RUNNING,
  FILL_PAUSED,                  /* cow-fill=/PATH, and PATH is missing */
  FILL_COMPLETE,                /* every block in the overlay */
  FILL_FAILED,                  /* stopped by an error of the source */
};

/* An overlay's fill, written by the fill threads only and read by the
 * statistics without a lock (every field atomic).  Its requests are
 * handed out in order but may end in any order.
 */
struct fill_progress {
  uint64_t claimed;             /* handed out up to here, in bytes */
  uint64_t filled;              /* bytes of the disk filled */
  uint64_t size;                /* of the base, once known */
  uint64_t started_ns;          /* monotonic, when it began; 0 before */
  uint64_t ended_ns;            /* when it completed or failed; 0 before */
  uint64_t read;                /* bytes of the plugin it read */
  uint64_t retries;             /* requests tried again after an error */
  enum fill_state state;
  int error;                    /* of a request being tried again, or
                                   FILL_FAILED's; else 0 */
};

/* A copy of an overlay's progress, read without a lock. */
extern void fill_progress_read (const struct fill_progress *from,
                                struct fill_progress *to);

/* The name of a state in the statistics. */
extern const char *fill_state_name (enum fill_state state);

#endif /* COW_FILLPROGRESS_H */
