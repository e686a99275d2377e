/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The temporary files that every throw-away overlay of the server
 * shares: cow-stripes files in $TMPDIR, created 0600, unlinked at
 * once, close-on-exec, so that they vanish with the process however it
 * ends.  Each file is cut into slots of one chunk of the stripes
 * (stripes.h), handed out to the overlays' chunks of that stripe as
 * they are first written, the lowest free one first, and given back,
 * punched, when an overlay ends.  So the files are about as long as
 * the data written, whatever the size of the disks, and however many
 * exports clients open, the server keeps one set of descriptors.
 */

#ifndef COW_TEMPFILES_H
#define COW_TEMPFILES_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "slotalloc.h"
#include "tsa.h"

struct temp_file {
  int fd;
  uint64_t length;              /* its length, a multiple of a slot */
  struct slotalloc slots;       /* the slots taken */
};

struct temp_files {
  char *tmpdir;
  unsigned nr;                  /* files, one per stripe */
  unsigned chunk_shift;         /* log2 of the bytes of a slot */
  mutex_t slots_lock;
  /* nr of them: their lengths and slots under slots_lock */
  struct temp_file *files FIELD_GUARDED_BY (slots_lock);
  bool exiting;                 /* set by temp_files_exiting */
};

/* nr files (1 to 64) in tmpdir, in slots of 2^chunk_shift bytes.
 * Returns NULL after nbdkit_error, which names TMPDIR.
 */
extern struct temp_files *temp_files_new (const char *tmpdir, unsigned nr,
                                          unsigned chunk_shift);
extern void temp_files_free (struct temp_files *files);

/* Takes the lowest free slot of file i into *first, and up to n - 1
 * free slots right after it, as far as the file can grow: the file
 * grown, sparsely, over them (and a few slots ahead), so that writes
 * seldom change its length.  Takes slots_lock.  Returns how many it
 * took, or -1 with errno set where the file cannot grow over even one
 * (EFBIG: the filesystem's largest file) or the slots run out.
 */
extern int temp_files_take (struct temp_files *files, unsigned i, unsigned n,
                            uint64_t *first);

/* Gives back slot of file i, which its overlay no longer reads or
 * writes: its disk space at once (punched), the slot to the next
 * chunk written.  Takes slots_lock.
 */
extern void temp_files_give_back (struct temp_files *files, unsigned i,
                                  uint64_t slot);

/* Cuts each file after its highest slot taken, once an overlay has
 * given its slots back.  Takes slots_lock.
 */
extern void temp_files_cut (struct temp_files *files);

/* nbdkit exits, and the files vanish with it: the overlays freed from
 * now on give nothing back (no punch, no cut).  Called by the one
 * thread left, before it frees the overlays.
 */
extern void temp_files_exiting (struct temp_files *files);

/* The files, and the disk space they take in bytes. */
extern unsigned temp_files_count (struct temp_files *files);
extern uint64_t temp_files_bytes (struct temp_files *files);

#endif /* COW_TEMPFILES_H */
