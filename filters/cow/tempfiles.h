/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The temporary files that every throw-away overlay of the server
 * shares: cow-stripes files in $TMPDIR, created 0600, unlinked at
 * once, close-on-exec, so that they vanish with the process however it
 * ends.  Each overlay is given a region of its own, at the same offset
 * in every file: however many exports a client opens, the server keeps
 * this many descriptors for all of them.
 */

#ifndef COW_TEMPFILES_H
#define COW_TEMPFILES_H

#include <pthread.h>
#include <stdint.h>

struct temp_files {
  unsigned nr;
  int *fds;                     /* nr of them */
  pthread_mutex_t regions_lock; /* protects end */
  uint64_t end;                 /* where the regions given out end */
};

/* nr files (1 to 64) in tmpdir.  Returns NULL after nbdkit_error,
 * which names TMPDIR.
 */
extern struct temp_files *temp_files_new (const char *tmpdir, unsigned nr);
extern void temp_files_free (struct temp_files *files);

/* Gives out a region of size bytes (> 0), setting *start to its first
 * byte.  The files grow, sparsely, over it, so that no write has to
 * change a file's size; a filesystem that cannot hold that size leaves
 * the files short, and writes beyond fail with EFBIG.  Fails, after
 * nbdkit_error, only when the regions would pass the largest offset a
 * file can have.  Takes regions_lock.  Returns 0 or -1.
 */
extern int temp_files_region (struct temp_files *files, uint64_t size,
                              uint64_t *start);

/* The disk space the files take, in bytes. */
extern uint64_t temp_files_bytes (const struct temp_files *files);

#endif /* COW_TEMPFILES_H */
