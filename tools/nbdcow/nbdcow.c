/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow: the command line, and what the subcommands share. */

#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "nbdcow.h"
#include "progress.h"

void
nbdcow_error (const char *fmt, ...)
{
  va_list ap;
  int saved = errno;            /* for %m */

  /* One line, whole, whichever thread prints it. */
  flockfile (stderr);
  progress_break_line ();
  fputs ("nbdcow: ", stderr);
  errno = saved;
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  funlockfile (stderr);
}

int
report_kept (const struct kept_overlay *ko)
{
  nbdcow_error ("%s", ko->why);
  return ko->damaged ? EXIT_DAMAGED : EXIT_UNUSABLE;
}

int
overlay_file_open (struct overlay_file *ov, const char *path,
                   enum kept_mode mode)
{
  int r;

  ov->states = (struct statemap) STATEMAP_INIT;
  if (kept_open (&ov->kept, path, mode) == -1)
    return report_kept (&ov->kept);
  if (kept_check_length (&ov->kept) == -1 ||
      kept_load_states (&ov->kept, &ov->states, NULL) == -1) {
    r = report_kept (&ov->kept);
    overlay_file_close (ov);
    return r;
  }
  return EXIT_OK;
}

void
overlay_file_close (struct overlay_file *ov)
{
  kept_close (&ov->kept);
  statemap_free (&ov->states);
}

/* The run overlay_file_each_run has found and not yet passed on: runs
 * of one state that meet are passed on as one.
 */
struct pending_run {
  const struct overlay_file *ov;
  overlay_run_fn *fn;
  void *opaque;
  uint64_t offset, length;
  unsigned state;
};

static int
add_run (struct pending_run *p, uint64_t offset, uint64_t length,
         unsigned state)
{
  int r = 0;

  if (p->length > 0 && p->state == state) {
    p->length += length;
    return 0;
  }
  if (p->length > 0)
    r = p->fn (p->offset, p->length, p->state, p->opaque);
  p->offset = offset;
  p->length = length;
  p->state = state;
  return r;
}

uint64_t
overlay_file_part_run (const struct overlay_file *ov, uint64_t b, uint64_t at,
                       bool *held, unsigned *place)
{
  const struct kept_layout *l = &ov->kept.header.layout;
  uint32_t units = statemap_get (&ov->states, b) == KEPT_PARTIAL
                   ? kept_parts_get (&ov->kept, b) : kept_units_all (l, b);
  uint32_t where = kept_where_get (&ov->kept, b);
  unsigned shift = kept_unit_shift (l);
  uint64_t start = blockgeom_start (&l->geom, b);
  uint64_t stop = blockgeom_end (&l->geom, b);
  unsigned i = (at - start) >> shift;

  *held = units >> i & 1;
  *place = *held ? where >> i & 1 : 0;
  while (++i < KEPT_PARTS && (units >> i & 1) == *held &&
         (!*held || (where >> i & 1) == *place))
    ;
  at = start + ((uint64_t) i << shift);
  return at < stop ? at : stop;
}

/* Block b, held in part: its runs of sub-blocks held (in the overlay)
 * and not (from the base).
 */
static int
add_partial_block (struct pending_run *p, uint64_t b)
{
  const struct blockgeom *g = &p->ov->kept.header.layout.geom;
  uint64_t at = blockgeom_start (g, b), stop = blockgeom_end (g, b), next;
  bool held;
  unsigned place;
  int r = 0;

  for (; r == 0 && at < stop; at = next) {
    next = overlay_file_part_run (p->ov, b, at, &held, &place);
    r = add_run (p, at, next - at, held ? KEPT_ALLOCATED : KEPT_NOT_ALLOCATED);
  }
  return r;
}

int
each_state_run (const struct blockgeom *g, const struct statemap *states,
                bool partial_alone, overlay_run_fn *fn, void *opaque)
{
  uint64_t blocks = blockgeom_blocks (g), b = 0;

  while (b < blocks) {
    unsigned state;
    uint64_t end = statemap_run (states, b, blocks, &state);
    uint64_t from = blockgeom_start (g, b);
    int r;

    if (state == KEPT_PARTIAL && partial_alone)
      end = b + 1;
    r = fn (from, blockgeom_end (g, end - 1) - from, state, opaque);
    if (r != 0)
      return r;
    b = end;
  }
  return 0;
}

int
overlay_file_each_block_run (const struct overlay_file *ov, overlay_run_fn *fn,
                             void *opaque)
{
  const struct kept_layout *l = &ov->kept.header.layout;

  return each_state_run (&l->geom, &ov->states, l->part_shift != 0, fn,
                         opaque);
}

/* The overlay_run_fn of overlay_file_each_run: a block run, a block
 * held in part as its runs of sub-blocks.
 */
static int
expand_run (uint64_t offset, uint64_t length, unsigned state, void *opaque)
{
  struct pending_run *p = opaque;

  if (state != KEPT_PARTIAL || p->ov->kept.header.layout.part_shift == 0)
    return add_run (p, offset, length, state);
  return add_partial_block (p, blockgeom_block (&p->ov->kept.header.layout.geom,
                                             offset));
}

int
overlay_file_each_run (const struct overlay_file *ov, overlay_run_fn *fn,
                       void *opaque)
{
  struct pending_run p = { .ov = ov, .fn = fn, .opaque = opaque };
  int r = overlay_file_each_block_run (ov, expand_run, &p);

  if (r == 0 && p.length > 0)
    r = fn (p.offset, p.length, p.state, opaque);
  return r;
}

/* The overlay_run_fn of overlay_file_count: the bytes. */
static int
count_run (uint64_t offset, uint64_t length, unsigned state, void *opaque)
{
  struct overlay_counts *c = opaque;

  (void) offset;
  c->bytes[state] += length;
  return 0;
}

void
overlay_file_count (const struct overlay_file *ov, struct overlay_counts *c)
{
  const struct blockgeom *g = &ov->kept.header.layout.geom;
  uint64_t blocks = kept_blocks (&ov->kept), b = 0;

  *c = (struct overlay_counts) { .geom = g };
  while (b < blocks) {
    unsigned state;
    uint64_t end = statemap_run (&ov->states, b, blocks, &state);

    c->blocks[state] += end - b;
    b = end;
  }
  overlay_file_each_run (ov, count_run, c);
}

uint64_t
overlay_file_block_bytes (const struct overlay_file *ov, uint64_t b)
{
  const struct blockgeom *g = &ov->kept.header.layout.geom;
  uint64_t at = blockgeom_start (g, b), stop = blockgeom_end (g, b), next;
  uint64_t bytes = 0;
  bool held;
  unsigned place;

  if (statemap_get (&ov->states, b) != KEPT_PARTIAL ||
      ov->kept.header.layout.part_shift == 0)
    return stop - at;
  for (; at < stop; at = next) {
    next = overlay_file_part_run (ov, b, at, &held, &place);
    if (held)
      bytes += next - at;
  }
  return bytes;
}

bool
same_file (const struct stat *a, const struct stat *b)
{
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

const char *
state_name (unsigned state)
{
  switch (state) {
  case KEPT_NOT_ALLOCATED: return "base";
  case KEPT_ALLOCATED: return "overlay";
  case KEPT_ZERO: return "zero";
  default: return "invalid";
  }
}

static const struct {
  const char *name;
  int (*run) (int argc, char **argv);
  const char *usage;
} commands[] = {
  { "info", cmd_info, "info [--json] FILE" },
  { "map", cmd_map, "map [--json] [--since=CHECKPOINT] FILE" },
  { "check", cmd_check, "check [--repair] FILE" },
  { "commit", cmd_commit,
    "commit [--connections=N] [--empty] [--progress] FILE TARGET" },
  { "export", cmd_export,
    "export [--connections=N] [--progress] [--since=CHECKPOINT] FILE "
    "[--base=BASE] OUT.qcow2" },
  { "checkpoint", cmd_checkpoint,
    "checkpoint create|delete SOCKET EXPORT NAME | "
    "checkpoint [--json] list SOCKET EXPORT" },
  { "view", cmd_view,
    "view create|delete SOCKET EXPORT NAME | view [--json] show SOCKET EXPORT" },
  { "backup", cmd_backup,
    "backup [--base=PREV] [--compress] [--connections=N] [--freeze=COMMAND] "
    "[--keep-base-checkpoint] [--progress] [--thaw=COMMAND] SOCKET URI NAME "
    "OUT.qcow2 | backup prune --keep=N FILE | backup verify FILE" },
};

void
subcommand_usage (const char *name, FILE *fp)
{
  size_t i;

  for (i = 0; i < sizeof commands / sizeof commands[0]; ++i)
    if (strcmp (name, commands[i].name) == 0)
      fprintf (fp, "usage: nbdcow %s\n", commands[i].usage);
  fprintf (fp, "See nbdcow(1).\n");
}

int
subcommand_getopt (int argc, char **argv, const struct option *options)
{
  int c;

  opterr = 0;                   /* its messages lack the program's name */
  c = getopt_long (argc, argv, ":h", options, NULL);
  switch (c) {
  case 'h':
    subcommand_usage (argv[0], stdout);
    return c;
  case ':':
    nbdcow_error ("%s: option '%s' needs a value", argv[0],
                  argv[optind - 1]);
    break;
  case '?':
    if (strncmp (argv[optind - 1], "--", 2) != 0)
      nbdcow_error ("%s: unrecognized option '-%c'", argv[0], optopt);
    else if (optopt != 0)
      nbdcow_error ("%s: option '%s' takes no value", argv[0],
                    argv[optind - 1]);
    else
      nbdcow_error ("%s: unrecognized option '%s'", argv[0],
                    argv[optind - 1]);
    break;
  default:
    return c;
  }
  subcommand_usage (argv[0], stderr);
  return '?';
}

static void
usage (FILE *fp)
{
  size_t i;

  fprintf (fp, "usage:\n");
  for (i = 0; i < sizeof commands / sizeof commands[0]; ++i)
    fprintf (fp, "  nbdcow %s\n", commands[i].usage);
  fprintf (fp, "  nbdcow --help | --version\n"
           "FILE is a kept overlay of the cow filter (cow-file=FILE).  "
           "See nbdcow(1).\n");
}

int
main (int argc, char **argv)
{
  size_t i;

  if (argc < 2) {
    usage (stderr);
    return EXIT_ERROR;
  }
  if (strcmp (argv[1], "--help") == 0 || strcmp (argv[1], "-h") == 0) {
    usage (stdout);
    return EXIT_OK;
  }
  if (strcmp (argv[1], "--version") == 0 || strcmp (argv[1], "-V") == 0) {
    printf ("nbdcow %s (overlay format %d)\n", PACKAGE_VERSION, KEPT_VERSION);
    return EXIT_OK;
  }
  for (i = 0; i < sizeof commands / sizeof commands[0]; ++i)
    if (strcmp (argv[1], commands[i].name) == 0)
      return commands[i].run (argc - 1, argv + 1);
  nbdcow_error ("unknown subcommand '%s'", argv[1]);
  usage (stderr);
  return EXIT_ERROR;
}
