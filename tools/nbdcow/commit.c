/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow commit: the overlay's blocks into a writable copy of the base,
 * and with --empty the overlay emptied once they are durable there.
 */

#include <config.h>

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "commit.h"
#include "copy.h"

int
parse_connections (const char *arg, unsigned *connections)
{
  char *end;
  unsigned long n = strtoul (arg, &end, 10);

  if (*arg == '\0' || *end != '\0' || n < 1 || n > MAX_CONNECTIONS) {
    nbdcow_error ("--connections=%s: must be a number from 1 to %d", arg,
                  MAX_CONNECTIONS);
    return -1;
  }
  *connections = n;
  return 0;
}

int
commit_into (struct overlay_file *ov, const char *target_name,
             unsigned connections, bool progress, const char *what,
             struct copy_totals *totals)
{
  const struct kept_layout *l = &ov->kept.header.layout;
  struct target *t = target_open (target_name, connections);
  int r;

  if (t == NULL)
    return -1;
  if (target_is_file (t, ov->kept.fd)) {
    nbdcow_error ("%s: this is the overlay itself: commit into a copy of "
                  "its base", target_name);
    target_close (t);
    return -1;
  }
  if (target_size (t) != l->geom.size) {
    nbdcow_error ("%s: %" PRIu64 " bytes, but the base of %s has %" PRIu64
                  ": not a copy of its base", target_name, target_size (t),
                  ov->kept.path, l->geom.size);
    target_close (t);
    return -1;
  }
  r = copy_overlay (ov, t, progress, what, totals);
  target_close (t);
  return r;
}

/* After the target is durable: no block reads differently if the
 * emptying stops half-way, since the base now holds what each block
 * in the overlay holds.  The file is flagged open meanwhile, so a
 * crash in the middle shows in nbdcow info.
 */
static int
empty_overlay (struct overlay_file *ov)
{
  struct kept_overlay *ko = &ov->kept;
  uint32_t recoveries = ko->header.recoveries;

  if (kept_set_flags (ko, KEPT_OPEN, recoveries) == -1 ||
      kept_empty (ko) == -1 ||
      kept_set_flags (ko, 0, recoveries) == -1) {
    report_kept (ko);
    return -1;
  }
  return 0;
}

int
cmd_commit (int argc, char **argv)
{
  enum { OPT_CONNECTIONS = 256, OPT_EMPTY, OPT_PROGRESS };
  const struct option options[] = {
    { "connections", required_argument, NULL, OPT_CONNECTIONS },
    { "empty", no_argument, NULL, OPT_EMPTY },
    { "progress", no_argument, NULL, OPT_PROGRESS },
    HELP_OPTION,
    { NULL, 0, NULL, 0 },
  };
  unsigned connections = DEFAULT_CONNECTIONS;
  bool empty = false, progress = false;
  struct copy_totals totals;
  struct overlay_file ov;
  int c, r;

  optind = 1;
  while ((c = subcommand_getopt (argc, argv, options)) != -1) {
    if (c == OPT_CONNECTIONS && parse_connections (optarg, &connections) == -1)
      return EXIT_ERROR;
    else if (c == OPT_EMPTY)
      empty = true;
    else if (c == OPT_PROGRESS)
      progress = true;
    else if (c == 'h')
      return EXIT_OK;
    else if (c == '?')
      return EXIT_ERROR;
  }
  if (argc - optind != 2) {
    nbdcow_error ("commit: expected FILE and TARGET");
    subcommand_usage ("commit", stderr);
    return EXIT_ERROR;
  }
  r = overlay_file_open (&ov, argv[optind],
                         empty ? KEPT_WRITE : KEPT_READ);
  if (r != EXIT_OK)
    return r;
  if (commit_into (&ov, argv[optind + 1], connections, progress, "commit",
                   &totals) == -1 ||
      (empty && empty_overlay (&ov) == -1))
    r = EXIT_ERROR;
  else
    printf ("%s: committed %" PRIu64 " bytes of data and %" PRIu64
            " bytes of zeros to %s over %u connection%s%s\n", argv[optind],
            totals.data_bytes, totals.zero_bytes, argv[optind + 1],
            totals.connections, totals.connections == 1 ? "" : "s",
            empty ? "; the overlay is empty now" : "");
  overlay_file_close (&ov);
  return r;
}
