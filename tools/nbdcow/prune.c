/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow backup prune: the newest backups of a chain kept, the oldest
 * of them made a full backup holding what its chain held (the same
 * disk, and its checkpoint record, so the next --base over it works),
 * compressed if it was, written beside it (with its mode) and put in
 * its place in one rename, and only then the older files removed.  A
 * kill before the rename leaves the old chain; after it, the new one,
 * and files no backup of it needs.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chainread.h"
#include "dirpath.h"
#include "nbdcow.h"
#include "outfile.h"
#include "qcow2.h"
#include "viewcopy.h"

/* Threads reading the chain into the new file. */
#define PRUNE_THREADS 2

struct prune {
  const char *newest;           /* FILE */
  unsigned long keep;           /* --keep */
  struct qcow2_chain chain;     /* FILE's, newest first */
  char *oldest_kept;            /* the file made full */
  char **older;                 /* the files after it, removed */
  unsigned nr_older;
};

/* Opens the chain of file into c.  Returns 0, or -1 after a message. */
static int
open_chain (struct qcow2_chain *c, const char *file)
{
  int r = qcow2_chain_open (c, file_name (file), file, NAMED_BY_USER);

  if (r == 0)
    nbdcow_error ("%s: its chain holds a file nbdcow backup did not write "
                  "(encrypted, or with other clusters)", file);
  return r == 1 ? 0 : -1;
}

/* Notes which file is made full and which are removed.  Returns 0, or
 * -1 after a message.
 */
static int
plan (struct prune *p)
{
  unsigned i;

  p->oldest_kept = strdup (qcow2_chain_path (&p->chain, p->keep - 1));
  p->nr_older = p->chain.files - p->keep;
  p->older = calloc (p->nr_older, sizeof *p->older);
  if (p->oldest_kept == NULL || p->older == NULL) {
    nbdcow_error ("%s: malloc: %m", p->newest);
    return -1;
  }
  for (i = 0; i < p->nr_older; ++i)
    if ((p->older[i] = strdup (qcow2_chain_path (&p->chain, p->keep + i))) == NULL) {
      nbdcow_error ("%s: malloc: %m", p->newest);
      return -1;
    }
  return 0;
}

static bool
never_stopped (void *opaque)
{
  (void) opaque;
  return false;
}

/* Reads file's checkpoint record, and sets *packed if its data is
 * packed, compressed.  Returns 0, or -1 after a message.
 */
static int
read_record (const char *file, struct qcow2_checkpoint *cp, bool *packed)
{
  int fd = open (file, O_RDONLY | O_CLOEXEC), r = -1, has_sums = 0;
  struct qcow2_sums sums;

  if (fd == -1)
    nbdcow_error ("%s: %m", file);
  else if ((r = qcow2_read_checkpoint (fd, cp)) != 1)
    nbdcow_error ("%s: %s", file, r == 0
                  ? "it records no checkpoint: not a backup nbdcow wrote"
                  : "its checkpoint record is damaged");
  else if ((has_sums = qcow2_read_sums (fd, &sums)) == -1) {
    nbdcow_error ("%s: its checksums' extension is damaged", file);
    r = -1;
  }
  *packed = r == 1 && has_sums == 1 && (sums.flags & QCOW2_SUMS_PACKED);
  if (fd >= 0)
    close (fd);
  return r == 1 ? 0 : -1;
}

/* Writes the disk that file's chain holds into a new file that then
 * replaces file, with its record.  Returns 0, or -1 after a message.
 */
static int
make_full (const char *file)
{
  struct qcow2_checkpoint cp;
  struct qcow2_chain chain;
  struct view_copy vc = { .what = file, .out = file,
                          .handles = PRUNE_THREADS,
                          .stopped = never_stopped };
  struct out_file o;
  struct stat st;
  int r;

  if (read_record (file, &cp, &vc.compress) == -1 ||
      open_chain (&chain, file) == -1)
    return -1;
  vc.from = &chain;
  r = out_create (&o, file, true);
  if (r == 0 && (stat (file, &st) == -1 ||
                 fchmod (o.fd, st.st_mode & 07777) == -1)) {
    nbdcow_error ("%s: cannot give the new file its mode: %m", file);
    out_close (&o, false);
    r = -1;
  }
  else if (r == 0) {
    vc.fd = o.fd;
    /* The disk's size in bytes: the record's (qcow2's is rounded up to
     * 512).
     */
    r = view_copy_map_chain (&vc, cp.disk_size);
    if (r == 0)
      r = view_copy_write (&vc, NULL, &cp);
    if (r == 0)
      r = out_publish (&o);
    if (out_close (&o, r == 0) == -1)
      r = -1;
  }
  view_copy_free (&vc);
  qcow2_chain_close (&chain);
  return r;
}

/* Removes the older files, each durably; one already gone (a prune of
 * the same chain run beside this one removed it) is as good as
 * removed.  Returns 0, or -1 after a message (the rest are still
 * removed).
 */
static int
remove_older (const struct prune *p)
{
  unsigned i;
  int r = 0;

  for (i = 0; i < p->nr_older; ++i)
    if ((unlink (p->older[i]) == -1 && errno != ENOENT) ||
        sync_dir_of (p->older[i]) == -1) {
      nbdcow_error ("%s: cannot remove it (no backup of %s needs it any "
                    "more): %m", p->older[i], p->newest);
      r = -1;
    }
  return r;
}

static int
run_prune (struct prune *p)
{
  unsigned files, i;
  int r = 0;

  if (open_chain (&p->chain, p->newest) == -1)
    return EXIT_ERROR;
  files = p->chain.files;
  if (files > p->keep)
    r = plan (p);
  qcow2_chain_close (&p->chain);
  if (r == -1)
    return EXIT_ERROR;
  if (files <= p->keep) {
    printf ("%s: a chain of %u backups, %lu kept: nothing to prune\n",
            p->newest, files, p->keep);
    return EXIT_OK;
  }
  if (make_full (p->oldest_kept) == -1)
    return EXIT_ERROR;
  if (remove_older (p) == -1)
    return EXIT_ERROR;
  printf ("%s: now a full backup; removed", p->oldest_kept);
  for (i = 0; i < p->nr_older; ++i)
    printf (" %s", p->older[i]);
  printf ("\n");
  return EXIT_OK;
}

int
cmd_backup_prune (int argc, char **argv)
{
  enum { OPT_KEEP = 256 };
  const struct option options[] = {
    { "keep", required_argument, NULL, OPT_KEEP },
    HELP_OPTION,
    { NULL, 0, NULL, 0 },
  };
  struct prune p = { .keep = 0 };
  char *end;
  unsigned i;
  int c, r;

  optind = 1;
  while ((c = subcommand_getopt (argc, argv, options)) != -1) {
    if (c == OPT_KEEP) {
      errno = 0;
      p.keep = strtoul (optarg, &end, 10);
      if (errno || *end || optarg[0] < '1' || optarg[0] > '9' ||
          p.keep > CHAIN_MAX) {
        nbdcow_error ("backup prune: --keep=%s: not a number of backups "
                      "from 1 to %d", optarg, CHAIN_MAX);
        c = '?';
      }
    }
    if (c == 'h' || c == '?')
      return c == 'h' ? EXIT_OK : EXIT_ERROR;
  }
  if (argc - optind != 1 || p.keep == 0) {
    nbdcow_error ("backup prune: expected --keep=N and FILE");
    subcommand_usage ("backup", stderr);
    return EXIT_ERROR;
  }
  p.newest = argv[optind];
  r = run_prune (&p);
  for (i = 0; i < p.nr_older && p.older; ++i)
    free (p.older[i]);
  free (p.older);
  free (p.oldest_kept);
  return r;
}
