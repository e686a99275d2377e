/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The temporary files that every throw-away overlay of the server
 * shares: cow-stripes files in $TMPDIR, created 0600, unlinked at
 * once, close-on-exec, so that they vanish with the process however it
 * ends.  Each overlay is given a region of its own, at the same offset
 * in every file: the first run given back by an overlay that ended
 * that holds it, else after the regions given out before: however many
 * exports clients open, the server keeps one set of descriptors for
 * all of them, and another set only where a filesystem cannot hold
 * one more region in files of the lengths they have (ext4 stops at
 * 16 TiB).
 */

#ifndef COW_TEMPFILES_H
#define COW_TEMPFILES_H

#include <pthread.h>
#include <stdint.h>

struct temp_set;

struct temp_files {
  char *tmpdir;
  unsigned nr;                  /* files in a set */
  pthread_mutex_t regions_lock; /* protects sets and their regions */
  struct temp_set *sets;        /* the newest first, never empty */
  unsigned nr_sets;             /* how many */
};

/* nr files (1 to 64) in tmpdir, one set.  Returns NULL after
 * nbdkit_error, which names TMPDIR.
 */
extern struct temp_files *temp_files_new (const char *tmpdir, unsigned nr);
extern void temp_files_free (struct temp_files *files);

/* Gives out a region of size bytes (> 0): sets *fds to the nr files
 * that hold it and *start to its first byte.  The files grow,
 * sparsely, over it, so that no write has to change a file's size.
 * A region that the newest set cannot hold goes at the start of a new
 * set; a filesystem that cannot hold even that leaves its files short,
 * and writes beyond fail with EFBIG.  Takes regions_lock.  Returns 0,
 * or -1 after nbdkit_error if a new set cannot be made.
 */
extern int temp_files_region (struct temp_files *files, uint64_t size,
                              const int **fds, uint64_t *start);

/* Gives back the region of size bytes at start in the files fds, as
 * temp_files_region gave it: its disk space at once (punched), its
 * offsets to a later region.  Takes regions_lock.
 */
extern void temp_files_release (struct temp_files *files, const int *fds,
                                uint64_t start, uint64_t size);

/* The files of every set, and the disk space they take in bytes. */
extern unsigned temp_files_count (struct temp_files *files);
extern uint64_t temp_files_bytes (struct temp_files *files);

#endif /* COW_TEMPFILES_H */
