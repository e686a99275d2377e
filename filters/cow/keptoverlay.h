/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* A kept overlay (cow-file=) as the filter opens, starts and closes
 * it: keptfile.h's calls in the order docs/overlay-format.md makes
 * crash-safe, each failure reported by nbdkit_error naming the file.
 * The block layer keeps the state map these load and the state pages
 * dirtied since the last flush (blk.c).
 *
 * No two of these run at once on the same overlay: open, start (under
 * the block layer's state_lock) and close run before and after every
 * request, and keptoverlay_flush runs beside requests, one at a time
 * (its caller holds flush_lock).
 */

#ifndef COW_KEPTOVERLAY_H
#define COW_KEPTOVERLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "keptfile.h"
#include "keptslots.h"
#include "statemap.h"

struct keptoverlay {
  struct keptfile file;
  /* The configuration, for the header of a new file. */
  uint32_t block_size;
  char *name;                   /* the export's */
  /* A packed overlay's slots (keptslots.h): looked up without a lock,
   * changed by the overlay file under its write lock.
   */
  struct keptslots slots;
};

/* Opens the kept overlay at path for export name, creating path if it
 * is missing, and locks it against other processes.  An existing file
 * must have been made for block_size and name.  Returns NULL after
 * nbdkit_error.
 */
extern struct keptoverlay *keptoverlay_open (const char *path,
                                             const char *name,
                                             uint32_t block_size);

/* Makes the file's header and state area for a base of size bytes, or
 * checks that an existing file was made for that size and loads its
 * states into states (empty before).  A file not closed cleanly is
 * counted as recovered, and what a crash left in its data area
 * outside the states is punched.  From here on the file is marked
 * open.  Returns 0, or -1 after nbdkit_error.
 */
extern int keptoverlay_start (struct keptoverlay *ko, uint64_t size,
                              struct statemap *states);

/* keptfile_flush, with a failure reported.  Returns 0, or -1 with
 * *err set.
 */
extern int keptoverlay_flush (struct keptoverlay *ko,
                              keptfile_take_pages *take,
                              keptfile_redirty_pages *redirty, void *opaque,
                              int *err);

/* Closes the file and frees ko.  clean: everything clients wrote is
 * flushed, so the file is marked closed cleanly (and a packed one cut
 * after its last slot); otherwise it stays marked open, and the next
 * start recovers what was flushed.
 */
extern void keptoverlay_close (struct keptoverlay *ko, bool clean);

#endif /* COW_KEPTOVERLAY_H */
