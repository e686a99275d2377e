/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow: inspect, check, commit and export the kept overlays of the
 * cow filter (cow-file=PATH) with no nbdkit running; and make the
 * checkpoints and views of a running one's exports (checkpoint.c), and
 * its backups (backup.c).  The file is
 * read and written only through the kept library (kept/kept.h), the
 * filter's own code of the format.  nbdcow.pod is the manual.
 */

#ifndef NBDCOW_H
#define NBDCOW_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "kept.h"
#include "slotmap.h"
#include "statemap.h"

/* The exit codes (nbdcow.pod, EXIT STATUS). */
enum {
  EXIT_OK = 0,
  EXIT_ERROR = 1,               /* bad usage, or the work failed */
  EXIT_DAMAGED = 2,             /* the overlay file is damaged */
  EXIT_UNUSABLE = 3,            /* missing, locked, unreadable, not ours */
};

/* An overlay file as the subcommands work on it: the kept overlay
 * opened (kept.h), and its block states loaded.
 */
struct overlay_file {
  struct kept_overlay kept;
  struct statemap states;
};

/* Opens path in mode and loads its states.  Returns EXIT_OK, or the
 * exit code after printing why not.
 */
extern int overlay_file_open (struct overlay_file *ov, const char *path,
                              enum kept_mode mode);
extern void overlay_file_close (struct overlay_file *ov);

/* The checkpoints of an overlay file and the marks of its blocks
 * (history.c), empty for a file of a version before 4.
 */
struct overlay_history {
  struct kept_table table;
  struct slotmap marks;
  bool stale;                   /* marks that may miss changes: every
                                   block counts as changed */
};

/* Loads them.  Returns EXIT_OK, or the exit code after printing why
 * not; overlay_history_free then needs no call.
 */
extern int overlay_file_history (struct overlay_file *ov,
                                 struct overlay_history *h);
extern void overlay_history_free (struct overlay_history *h);

/* Whether block b of the overlay changed since the checkpoint of
 * epoch epoch.
 */
extern bool overlay_history_changed (const struct overlay_history *h,
                                     uint64_t b, uint32_t epoch);

/* Narrows the states of ov to the blocks changed since checkpoint
 * name: every other block reads from the base, as in the filter's
 * changes view.  Returns EXIT_OK, or the exit code after printing why
 * not (EXIT_ERROR: no such checkpoint).
 */
extern int overlay_file_since (struct overlay_file *ov, const char *name);

/* The control socket of a running nbdkit (checkpoint.c).  Sends verb
 * export [name] to socket_path: EXIT_OK with the answer's lines after
 * "ok\n" at *lines (within answer, CONTROL_ANSWER_MAX bytes), or says
 * what is wrong and returns the exit code.  The longest answer is "ok"
 * and 32 names of at most 128 bytes, with room for a message naming a
 * long export.
 */
#define CONTROL_ANSWER_MAX 16384
extern int control_command (const char *socket_path, const char *verb,
                            const char *export, const char *name,
                            char *answer, const char **lines);

/* The one reader of the lines of a control answer (checkpoint.c).
 * Copies the line at *lines into line (size bytes, made a string
 * without its newline) and moves *lines past it.  Returns false, with
 * *lines unmoved, at the end of the answer or if the line has no
 * newline or does not fit.
 */
extern bool control_next_line (const char **lines, char *line, size_t size);

/* A view as the answer of "view" shows it: its name, state ("live",
 * "broken"), bytes kept, the export name that reads it and the start
 * of those that read its changes since a checkpoint (empty without
 * cow-changes-separator).  Names are NBD's, at most 4096 bytes.
 */
#define CONTROL_LINE_MAX 4200
struct control_view {
  char name[CONTROL_LINE_MAX];
  char state[CONTROL_LINE_MAX];
  unsigned long long kept_bytes;
  unsigned long long blocks_left;       /* "giving-back": blocks to look at */
  char export[CONTROL_LINE_MAX];
  char changes[CONTROL_LINE_MAX];
  char why[CONTROL_LINE_MAX];   /* "ended": why, if the server says */
};

/* Reads the answer of "view" (its lines after "ok\n"): 1 with *v
 * filled if the export has a view, 0 if it has none, -1 if the answer
 * is not one the server gives.
 */
extern int control_read_view (const char *lines, struct control_view *v);

/* Prints ko->why and returns its exit code (damaged or unusable). */
extern int report_kept (const struct kept_overlay *ko);

/* Calls fn (offset, length, state, opaque) for each run of the disk in
 * one state, in order, lengths clipped to the base size: a block held
 * in part is its sub-blocks, those it holds in the overlay
 * (KEPT_ALLOCATED), the others from the base.  Stops at and returns
 * the first non-zero return.
 */
typedef int overlay_run_fn (uint64_t offset, uint64_t length,
                            unsigned state, void *opaque);
extern int overlay_file_each_run (const struct overlay_file *ov,
                                  overlay_run_fn *fn, void *opaque);

/* The same, by blocks: a block held in part is a run of its own, in
 * state KEPT_PARTIAL (its sub-blocks held: kept_parts_get).
 */
extern int overlay_file_each_block_run (const struct overlay_file *ov,
                                        overlay_run_fn *fn, void *opaque);

/* The same for any map of blocks of geometry g in the states of
 * states, a block in KEPT_PARTIAL a run of its own if partial_alone.
 */
extern int each_state_run (const struct blockgeom *g,
                           const struct statemap *states, bool partial_alone,
                           overlay_run_fn *fn, void *opaque);

/* The blocks in each state (by enum kept_state: 3 counts the blocks
 * held in part, or in a file of version 1 or 2 the invalid state check
 * finds), and the bytes of the disk in each state as
 * overlay_file_each_run gives them.
 */
struct overlay_counts {
  const struct blockgeom *geom;
  uint64_t blocks[4];
  uint64_t bytes[4];
};
extern void overlay_file_count (const struct overlay_file *ov,
                                struct overlay_counts *c);

/* Block b of ov, in the overlay whole or in part: the end of the run
 * of its units (kept_units_all) from offset at (of the disk, in the
 * block) on that it all holds in one place, or all does not (*held
 * says which, *place where), clipped to the end of the block.
 */
extern uint64_t overlay_file_part_run (const struct overlay_file *ov,
                                       uint64_t b, uint64_t at, bool *held,
                                       unsigned *place);

/* Whether block b of ov, in the overlay, has units in place 1
 * (version 6): its units then lie in two slots.
 */
static inline bool
overlay_file_has_places (const struct overlay_file *ov, uint64_t b)
{
  return kept_where_get (&ov->kept, b) != 0;
}

/* The bytes of the disk block b of ov holds in the overlay: those of
 * its sub-blocks held if it is held in part, else all of them.
 */
extern uint64_t overlay_file_block_bytes (const struct overlay_file *ov,
                                          uint64_t b);

/* Whether a and b are the same file (device and inode). */
struct stat;
extern bool same_file (const struct stat *a, const struct stat *b);

/* The name of a block state in output: "base", "overlay", "zero". */
extern const char *state_name (unsigned state);

/* Prints a message prefixed "nbdcow: " on stderr, on a line of its own
 * whichever thread prints it.
 */
extern void nbdcow_error (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

/* The subcommands: argv[0] is the subcommand's name. */

/* Prints the usage line of subcommand name on fp, and where the manual
 * is.
 */
extern void subcommand_usage (const char *name, FILE *fp);

/* getopt_long for subcommand argv[0], whose options end with
 * HELP_OPTION.  Returns the next option's value as getopt_long does,
 * -1 after the last; 'h' after printing the usage on stdout (--help);
 * '?' after printing what is wrong and the usage on stderr (an option
 * unknown, or given a value it does not take, or lacking one).
 */
#define HELP_OPTION { "help", no_argument, NULL, 'h' }
extern int subcommand_getopt (int argc, char **argv,
                              const struct option *options);

extern int cmd_info (int argc, char **argv);
extern int cmd_map (int argc, char **argv);
extern int cmd_check (int argc, char **argv);
extern int cmd_commit (int argc, char **argv);
extern int cmd_export (int argc, char **argv);
extern int cmd_checkpoint (int argc, char **argv);
extern int cmd_view (int argc, char **argv);
extern int cmd_backup (int argc, char **argv);
extern int cmd_backup_prune (int argc, char **argv);
extern int cmd_backup_verify (int argc, char **argv);

#endif /* NBDCOW_H */
