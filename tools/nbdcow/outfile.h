/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The qcow2 file nbdcow export and backup write, and the backing file
 * it names.
 */

#ifndef NBDCOW_OUTFILE_H
#define NBDCOW_OUTFILE_H

#include <stdbool.h>

/* Where the file is written: a file with no name yet in OUT's
 * directory (O_TMPFILE), named OUT only once it is complete, so that a
 * run that fails or is killed leaves no file and an earlier OUT as it
 * was.  On a filesystem without such files or without /proc, OUT
 * itself, which a failure removes and a kill leaves behind (not yet a
 * qcow2 file: its header is written last).
 */
struct out_file {
  const char *path;             /* OUT */
  char *dir;                    /* its directory */
  int fd;
  bool named;                   /* fd has a name: OUT, or temp */
  char *temp;                   /* OUT.nbdcow-PID, fd's name, or NULL */
};

/* Opens the file for OUT.  With keep_out (OUT must stay as it is until
 * the new file replaces it), a filesystem without nameless files gets
 * one named OUT.nbdcow-PID, which a failure removes and a kill leaves
 * behind.  Returns 0, or -1 after a message.
 */
extern int out_create (struct out_file *o, const char *out, bool keep_out);

/* Names the complete file OUT, replacing an earlier OUT in one rename
 * (from OUT.nbdcow-PID, the one name a kill can leave behind), and
 * makes the name durable.  Returns 0, or -1 after a message.
 */
extern int out_publish (struct out_file *o);

/* Closes the file; a named one that is not complete is removed.
 * Returns 0, or -1 after a message.
 */
extern int out_close (struct out_file *o, bool complete);

/* Opens the backing file base (--base=BASE, or the name a qcow2 file
 * records) of the qcow2 file out, where qemu finds it: relative to
 * out's directory unless absolute; sets *st unless st is NULL, and
 * *path to the path it opened (malloc'd) unless path is NULL.  Returns
 * its descriptor, read only, or -1 after a message (also if the name
 * is too long for a header) naming it as named says.
 */
enum backing_named {
  NAMED_BY_BASE,                /* --base=BASE */
  NAMED_BY_USER,                /* a FILE on the command line */
  NAMED_BY_OUT,                 /* the backing file that out records */
};
struct stat;
extern int open_backing (const char *base, const char *out, struct stat *st,
                         char **path, enum backing_named named);

/* The name of path in its directory: open_backing (file_name (path),
 * path, ..., NAMED_BY_USER) opens path itself, the start of its chain.
 */
extern const char *file_name (const char *path);

/* The name the header of the qcow2 file out gives its backing file
 * base: base as given if relative (qemu finds it from out's
 * directory), else its name from out's directory if it lies there or
 * below (path_below), so that the folder can move with its chain,
 * else base.  malloc'd, or NULL after a message.
 */
extern char *backing_name (const char *base, const char *out);

#endif /* NBDCOW_OUTFILE_H */
