/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow backup: the disk of an export of a running nbdkit as it was
 * at one instant, while its clients go on writing.  It checks the
 * previous backup (--base) against the server, makes the export's
 * point-in-time view and checkpoint NAME (control socket), has
 * viewcopy.c copy the view (the whole disk, or the changes since the
 * previous backup's checkpoint) over NBD into a qcow2 file that names
 * NAME in its header, and deletes the view, leaving the checkpoint for
 * the next backup.
 */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <libnbd.h>

#include "checkpoint.h"
#include "commit.h"
#include "dirpath.h"
#include "outfile.h"
#include "progress.h"
#include "qcow2.h"
#include "viewcopy.h"

struct backup {
  const char *control;          /* SOCKET */
  const char *uri;              /* of the export */
  const char *name;             /* of the view and checkpoint */
  const char *out;              /* OUT, through its links */
  const char *out_named;        /* OUT as named: where PREV is found from,
                                   as qemu finds it */
  const char *base;             /* --base=PREV, or NULL */
  const char *freeze, *thaw;    /* --freeze=COMMAND, --thaw=COMMAND */
  unsigned connections;
  bool progress;
  bool keep_base_checkpoint;    /* --keep-base-checkpoint */
  bool compress;                /* --compress */

  char export[QCOW2_CHECKPOINT_EXPORT_MAX + 1];  /* the URI's */
  struct qcow2_checkpoint prev;  /* PREV's */
  char identity[QCOW2_IDENTITY_MAX + 1];  /* checkpoint NAME's */
  char read_export[CONTROL_ANSWER_MAX];  /* the view, or its changes */
  bool view_made;
  bool thaw_failed;             /* the backup goes on, but exits 1 */
  int status;                   /* the exit code of a failure */

  struct nbd_handle *client;    /* the export kept open meanwhile */
  struct nbd_handle *nbd[MAX_CONNECTIONS];
  unsigned handles;
  uint64_t size;                /* of the disk */
  struct out_file o;
  bool published;               /* OUT is the backup */
  struct view_copy copy;
};

/* Set by SIGINT, SIGTERM and SIGHUP: the copy stops, and the view and
 * checkpoint are deleted as after any failure.
 */
static volatile sig_atomic_t interrupted;

static void
interrupt (int sig)
{
  (void) sig;
  interrupted = 1;
}

static void
catch_signals (void)
{
  struct sigaction sa = { .sa_handler = interrupt };
  int sigs[] = { SIGINT, SIGTERM, SIGHUP };
  size_t i;

  sigemptyset (&sa.sa_mask);
  for (i = 0; i < sizeof sigs / sizeof sigs[0]; ++i)
    sigaction (sigs[i], &sa, NULL);
}

/* Whether a signal came; if so, says so once. */
static bool
stopped (struct backup *b)
{
  static _Atomic bool said;

  if (!interrupted)
    return false;
  if (!atomic_exchange (&said, true))
    nbdcow_error ("%s: interrupted by a signal: no backup made", b->out);
  return true;
}

/*----------------------------------------------------------------------
 * The export, the previous backup and the view.
 */

/* Opens a handle on b's URI reading export (or the URI's own if
 * NULL), asking for block status.  Returns NULL after a message, with
 * b->status EXIT_UNUSABLE if no server answered there (a URI that
 * names no server, a server that refuses the export: EXIT_ERROR).
 */
static struct nbd_handle *
connect_export (struct backup *b, const char *export)
{
  struct nbd_handle *h = nbd_create ();
  bool reached = false;
  int err;

  if (h &&
      nbd_set_opt_mode (h, true) != -1 &&
      nbd_add_meta_context (h, LIBNBD_CONTEXT_BASE_ALLOCATION) != -1) {
    if (nbd_connect_uri (h, b->uri) != -1)
      reached = true;
    if (reached &&
        (export == NULL || nbd_set_export_name (h, export) != -1) &&
        nbd_opt_go (h) != -1)
      return h;
  }
  err = nbd_get_errno ();
  if (reached) {
    char *name = export ? NULL : nbd_get_export_name (h);

    nbdcow_error ("%s: the server does not serve export \"%s\": %s", b->uri,
                  export ? export : name ? name : "", nbd_get_error ());
    free (name);
  }
  else
    nbdcow_error ("%s: %s", b->uri, nbd_get_error ());
  /* In option mode, connecting ends at the handshake: a server that
   * did not answer, unless the URI itself was at fault.
   */
  if (!reached && err != EINVAL && err != EOPNOTSUPP && err != ENOTSUP &&
      err != EPROTONOSUPPORT)
    b->status = EXIT_UNUSABLE;
  nbd_close (h);
  return NULL;
}

/* control_command for b: a failure's exit code kept in b->status. */
static int
control (struct backup *b, const char *verb, const char *name, char *answer,
         const char **lines)
{
  int status = control_command (b->control, verb, b->export, name, answer,
                                lines);

  if (status == EXIT_OK)
    return 0;
  if (status > b->status)
    b->status = status;
  return -1;
}

/* Learns the name of the URI's export, and keeps a client on it until
 * the view is deleted: an overlay that ends with its last client
 * (cow-lifetime=clients) keeps the view so.
 */
static int
learn_export (struct backup *b)
{
  struct nbd_handle *h = b->client = connect_export (b, NULL);
  char *name = h ? nbd_get_export_name (h) : NULL;
  int r = -1;

  if (h && name == NULL)
    nbdcow_error ("%s: %s", b->uri, nbd_get_error ());
  else if (name && strlen (name) > QCOW2_CHECKPOINT_EXPORT_MAX)
    nbdcow_error ("%s: the export's name is too long", b->uri);
  else if (name && strchr (name, '\n'))
    nbdcow_error ("%s: the export's name holds a newline, which the "
                  "control socket's answers cannot carry", b->uri);
  else if (name) {
    strcpy (b->export, name);
    r = 0;
  }
  free (name);
  return r;
}

/* Ends learn_export's client. */
static void
end_client (struct backup *b)
{
  if (b->client == NULL)
    return;
  nbd_shutdown (b->client, 0);
  nbd_close (b->client);
  b->client = NULL;
}

/* Whether list, the answer of a checkpoint list, has name. */
static bool
has_checkpoint (const char *list, const char *name)
{
  char line[CONTROL_LINE_MAX];

  while (control_next_line (&list, line, sizeof line))
    if (strcmp (line, name) == 0)
      return true;
  return false;
}

/* Sets id to the identity the server gives checkpoint name. */
static int
identify (struct backup *b, const char *name, char *id)
{
  char answer[CONTROL_ANSWER_MAX];
  const char *lines;

  if (control (b, "identify", name, answer, &lines) == -1)
    return -1;
  if (!control_next_line (&lines, id, QCOW2_IDENTITY_MAX + 1) ||
      id[0] == '\0') {
    nbdcow_error ("%s: the server gives checkpoint \"%s\" no identity",
                  b->control, name);
    return -1;
  }
  return 0;
}

/* --base=PREV: a backup of this export, at a checkpoint it still has
 * (the same instance of it: one deleted and made again is another).
 */
static int
check_previous (struct backup *b)
{
  char answer[CONTROL_ANSWER_MAX], id[QCOW2_IDENTITY_MAX + 1];
  const char *lines;
  uint64_t size;
  int fd = open_backing (b->base, b->out_named, NULL, NULL, NAMED_BY_BASE);
  int r = -1;
  int found = 0;

  if (fd == -1)
    ;                           /* it said why */
  else if (!qcow2_virtual_size (fd, &size))
    nbdcow_error ("--base=%s: not a backup made by nbdcow backup (not a "
                  "qcow2 image)", b->base);
  else if ((found = qcow2_read_checkpoint (fd, &b->prev)) != 1)
    nbdcow_error ("--base=%s: %s", b->base,
                  found == -1 ? "a qcow2 image whose header is damaged, or "
                  "whose record of its backup this nbdcow cannot read"
                  : "not a backup made by nbdcow backup (its header names "
                  "no checkpoint)");
  else if (strcmp (b->prev.export, b->export) != 0)
    nbdcow_error ("--base=%s: a backup of export \"%s\", not of \"%s\"",
                  b->base, b->prev.export, b->export);
  else if (control (b, "list", NULL, answer, &lines) == -1)
    ;                           /* it said why */
  else if (!has_checkpoint (lines, b->prev.name))
    nbdcow_error ("--base=%s: holds the disk at checkpoint \"%s\" of export "
                  "\"%s\", which the server does not have: make a full "
                  "backup (without --base)", b->base, b->prev.name,
                  b->export);
  else if (identify (b, b->prev.name, id) == -1)
    ;                           /* it said why */
  else if (strcmp (id, b->prev.identity) != 0)
    nbdcow_error ("--base=%s: holds the disk at another checkpoint \"%s\" "
                  "than the export's (of another server or overlay file, "
                  "or deleted and made again since): make a full backup "
                  "(without --base)", b->base, b->prev.name);
  else
    r = 0;
  if (fd >= 0)
    close (fd);
  return r;
}

/* The backing chain of --base=PREV, PREV first, as qemu follows it:
 * each file there that nbdcow backup made must be as long as it made
 * it (a file cut short lost data), and none may be OUT (which the
 * backup replaces).  At most CHAIN_MAX files.
 */
static int
check_chain (struct backup *b)
{
  struct stat out, st;
  bool out_exists = stat (b->out, &out) == 0;
  char *path = NULL, name[QCOW2_MAX_BACKING + 1];
  const char *from = b->out_named;
  int depth, r = -1, fd;

  snprintf (name, sizeof name, "%s", b->base);
  for (depth = 0; depth < CHAIN_MAX; ++depth) {
    struct qcow2_checkpoint cp;
    char *next = NULL;
    int has;

    fd = open_backing (name, from, &st, &next,
                       depth ? NAMED_BY_OUT : NAMED_BY_BASE);
    if (fd == -1)
      break;
    free (path);
    path = next;
    from = path;
    if (out_exists && same_file (&out, &st)) {
      nbdcow_error ("%s: is %s, %s: name a new file for the backup", b->out,
                    path, depth ? "in the backing chain of --base"
                                : "--base itself");
      break;
    }
    if (qcow2_read_checkpoint (fd, &cp) == 1 &&
        (uint64_t) st.st_size < cp.file_length) {
      nbdcow_error ("--base=%s: %s is a backup cut short: %" PRIu64
                    " bytes of the %" PRIu64 " written", b->base, path,
                    (uint64_t) st.st_size, cp.file_length);
      break;
    }
    has = qcow2_backing_name (fd, name);
    close (fd);
    fd = -1;
    if (has == 0) {
      r = 0;
      break;
    }
    if (has == -1) {
      nbdcow_error ("--base=%s: %s: the backing file's name in its header "
                    "is damaged", b->base, path);
      break;
    }
  }
  if (depth == CHAIN_MAX)
    nbdcow_error ("--base=%s: a backing chain of more than %d files (a loop?)",
                  b->base, CHAIN_MAX);
  if (fd >= 0)
    close (fd);
  free (path);
  return r;
}

/* Runs the shell command of option what.  Returns 0, or -1 after a
 * message if it did not exit 0.
 */
static int
run_hook (const char *what, const char *command)
{
  int status = system (command);

  if (status == 0)
    return 0;
  if (status == -1)
    nbdcow_error ("--%s=%s: %m", what, command);
  else if (WIFEXITED (status))
    nbdcow_error ("--%s=%s: exit status %d", what, command,
                  WEXITSTATUS (status));
  else
    nbdcow_error ("--%s=%s: ended by a signal", what, command);
  return -1;
}

/* Whether the control socket answers, before anything is made there:
 * then a command that finds no answer later leaves the server's part
 * unknown, which a failed backup says.  Returns 0, or -1 after a
 * message.
 */
static int
reach_control (struct backup *b)
{
  char answer[CONTROL_ANSWER_MAX];
  const char *lines;

  return control (b, "list", NULL, answer, &lines);
}

/* Makes the view and checkpoint, between --freeze and --thaw. */
static int
make_instant (struct backup *b)
{
  char answer[CONTROL_ANSWER_MAX];
  const char *lines;
  int r;

  if (b->freeze && run_hook ("freeze", b->freeze) == -1)
    return -1;
  r = control (b, "view-create", b->name, answer, &lines);
  /* No answer: the server may have made them before it went. */
  b->view_made = r == 0 || b->status == EXIT_UNUSABLE;
  if (r == 0)
    r = identify (b, b->name, b->identity);
  if (b->thaw && run_hook ("thaw", b->thaw) == -1) {
    nbdcow_error ("%s: the guest may still be frozen; the backup goes on",
                  b->out);
    b->thaw_failed = true;
  }
  return r;
}

/* Whether name is prefix, one separator byte, then suffix. */
static bool
joins (const char *name, const char *prefix, const char *suffix)
{
  size_t p = strlen (prefix);

  return strlen (name) == p + 1 + strlen (suffix) &&
         strncmp (name, prefix, p) == 0 && strcmp (name + p + 1, suffix) == 0;
}

/* The view NAME as the server shows it (control_read_view).  Returns
 * 0, or -1 after a message if the export has no view NAME, or names
 * its exports otherwise than EXPORT, a separator and NAME (and a
 * separator).
 */
static int
show_view (struct backup *b, struct control_view *v)
{
  char answer[CONTROL_ANSWER_MAX];
  const char *lines;

  if (control (b, "view", NULL, answer, &lines) == -1)
    return -1;
  if (control_read_view (lines, v) != 1 || strcmp (v->name, b->name) != 0 ||
      !joins (v->export, b->export, b->name) ||
      (v->changes[0] && !joins (v->changes, v->export, ""))) {
    nbdcow_error ("%s: the server does not show view \"%s\" of export "
                  "\"%s\" as made", b->control, b->name, b->export);
    return -1;
  }
  return 0;
}

/* Makes the view and checkpoint, and learns the export to read. */
static int
make_view (struct backup *b)
{
  struct control_view v;

  if (make_instant (b) == -1 || show_view (b, &v) == -1)
    return -1;
  if (b->base && v.changes[0] == '\0') {
    nbdcow_error ("%s: the server has no cow-changes-separator, so "
                  "--base=%s cannot read the changes since checkpoint "
                  "\"%s\": make a full backup, or add the parameter",
                  b->control, b->base, b->prev.name);
    return -1;
  }
  snprintf (b->read_export, sizeof b->read_export, "%s%s",
            b->base ? v.changes : v.export, b->base ? b->prev.name : "");
  return 0;
}

/* After the copy: the view must still be whole (a view that broke
 * fails the reads made after, but a backup asks no more of chance).
 */
static int
check_view_live (struct backup *b)
{
  struct control_view v;

  if (show_view (b, &v) == -1)
    return -1;
  if (strcmp (v.state, "live") == 0)
    return 0;
  nbdcow_error ("%s: view \"%s\" is %s (the overlay ran out of room for "
                "it): no backup made", b->out, b->name, v.state);
  return -1;
}

/* Deletes the view, if made.  Returns 0, or -1 after a message. */
static int
delete_view (struct backup *b)
{
  char answer[CONTROL_ANSWER_MAX], step[CHECKPOINT_NAME_MAX + 64];
  const char *lines;

  if (!b->view_made)
    return 0;
  snprintf (step, sizeof step, "deleting view \"%s\" (the server gives "
            "back what only it kept)", b->name);
  progress_step (b->progress, "backup", step);
  b->view_made = control (b, "view-delete", b->name, answer, &lines) == -1;
  if (!b->view_made)
    progress_step (b->progress, "backup", "view deleted");
  return b->view_made ? -1 : 0;
}

/* After a failure: the checkpoint NAME deleted too, with the view if
 * still there, so that the same backup can run again; where that
 * fails (the server gone), what may be left said.
 */
static void
forget_instant (struct backup *b, bool made)
{
  char answer[CONTROL_ANSWER_MAX];
  const char *lines;

  if (!made)
    return;
  if (delete_view (b) == 0 &&
      control (b, "delete", b->name, answer, &lines) == 0)
    return;
  nbdcow_error ("%s: no backup made; view and checkpoint \"%s\" may be "
                "left: delete them with nbdcow view delete and checkpoint "
                "delete while the server runs (once it stopped, the view has "
                "ended, and a kept overlay's file keeps the checkpoint)",
                b->out, b->name);
}

static int
open_handles (struct backup *b)
{
  int64_t size;

  for (b->handles = 0; b->handles < b->connections; ++b->handles) {
    b->nbd[b->handles] = connect_export (b, b->read_export);
    if (b->nbd[b->handles] == NULL)
      return -1;
  }
  size = nbd_get_size (b->nbd[0]);
  if (size == -1) {
    nbdcow_error ("%s: %s", b->read_export, nbd_get_error ());
    return -1;
  }
  if (nbd_can_meta_context (b->nbd[0], LIBNBD_CONTEXT_BASE_ALLOCATION) != 1) {
    nbdcow_error ("%s: export \"%s\" answers no block status", b->uri,
                  b->read_export);
    return -1;
  }
  if (b->base && b->prev.disk_size != (uint64_t) size) {
    nbdcow_error ("--base=%s: a disk of %" PRIu64 " bytes, but the export "
                  "has %" PRIi64, b->base, b->prev.disk_size, size);
    return -1;
  }
  b->size = size;
  return 0;
}

static void
close_handles (struct backup *b)
{
  unsigned i;

  for (i = 0; i < b->handles; ++i) {
    nbd_shutdown (b->nbd[i], 0);
    nbd_close (b->nbd[i]);
  }
  b->handles = 0;
}

/* Refuses an OUT that is not a file the backup could replace. */
static int
check_out (const struct backup *b)
{
  struct stat o;

  if (stat (b->out, &o) == 0 && !S_ISREG (o.st_mode)) {
    nbdcow_error ("%s: is not a regular file: name a new file for the "
                  "backup", b->out);
    return -1;
  }
  return 0;
}

/* Whether a signal came (the view_copy's stopped). */
static bool
copy_stopped (void *opaque)
{
  return stopped (opaque);
}

/* Whether the server tracks changes by blocks larger than the
 * backup's clusters (it advertises its cow-block-size as the preferred
 * block size), so that an increment compares its clusters with PREV's.
 */
static bool
changes_coarser (const struct backup *b)
{
  int64_t preferred = nbd_get_block_size (b->nbd[0], LIBNBD_SIZE_PREFERRED);

  return preferred > (INT64_C (1) << CLUSTER_BITS);
}

/* Maps the view and writes the file: the checkpoint's record made.  An
 * increment from a server that tracks changes by blocks larger than a
 * cluster leaves to PREV the clusters of a changed block that read as
 * PREV does.
 */
static int
copy_view (struct backup *b)
{
  struct qcow2_checkpoint cp = { .export = "" };
  struct qcow2_chain prev;
  char *backing = NULL;
  int opened = 0, r;

  b->copy = (struct view_copy) {
    .nbd = b->nbd, .handles = b->handles, .what = b->read_export,
    .out = b->out, .fd = b->o.fd, .increment = b->base != NULL,
    .progress = b->progress, .compress = b->compress,
    .stopped = copy_stopped, .opaque = b,
    .states = STATEMAP_INIT, .base_identity = b->base ? b->prev.identity
                                                      : NULL,
  };
  strcpy (cp.export, b->export);
  strcpy (cp.name, b->name);
  strcpy (cp.identity, b->identity);
  if (b->base && changes_coarser (b)) {
    opened = qcow2_chain_open (&prev, b->base, b->out_named, NAMED_BY_BASE);
    if (opened == -1)
      return -1;
    if (opened == 1)
      b->copy.prev = &prev;
  }
  r = view_copy_map (&b->copy, b->size);
  if (r == 0 && b->base &&
      (backing = backing_name (b->base, b->out_named)) == NULL)
    r = -1;
  if (r == 0)
    r = view_copy_write (&b->copy, backing, &cp);
  free (backing);
  if (opened == 1)
    qcow2_chain_close (&prev);
  return r;
}

/* Maps the view, writes the file and checks that the view is still
 * live.  Returns 0, or -1 after a message.
 */
static int
copy_checked (struct backup *b)
{
  int r = copy_view (b);

  if (r == 0)
    return check_view_live (b);
  if (!interrupted)
    check_view_live (b);        /* a read failed: say if the view broke */
  return r;
}

/* Once OUT is the backup: the checkpoint of --base=PREV deleted, as
 * the next increment goes over OUT, so that a daily job never runs out
 * of checkpoints; kept with --keep-base-checkpoint, for chains that
 * branch.  A failure is said and leaves the backup made.
 */
static void
rotate (struct backup *b)
{
  char answer[CONTROL_ANSWER_MAX];
  const char *lines;

  if (!b->base || b->keep_base_checkpoint ||
      control_command (b->control, "delete", b->export, b->prev.name, answer,
                       &lines) == EXIT_OK)
    return;
  nbdcow_error ("%s: backup made, but checkpoint \"%s\" of --base=%s is "
                "left: delete it with nbdcow checkpoint delete (an export "
                "keeps at most %d)", b->out, b->prev.name, b->base,
                CHECKPOINTS_MAX);
}

/* Every step, in order; the view ends however they end.  OUT is named
 * last, once the view is deleted and no signal came: it exists only
 * for a backup that succeeded.
 */
static int
run_backup (struct backup *b)
{
  bool created = false, made;
  int r = -1;

  if (learn_export (b) == -1 || check_out (b) == -1 ||
      (b->base && (check_chain (b) == -1 || check_previous (b) == -1)) ||
      reach_control (b) == -1)
    return -1;
  r = make_view (b);
  made = b->view_made;
  if (r == 0)
    r = open_handles (b);
  if (r == 0)
    r = out_create (&b->o, b->out, false);
  created = r == 0;
  if (r == 0)
    r = copy_checked (b);
  close_handles (b);
  if (delete_view (b) == -1)
    r = -1;
  if (r == 0 && stopped (b))
    r = -1;
  if (r == 0)
    r = out_publish (&b->o);
  if (r == -1)
    forget_instant (b, made);
  if (created && out_close (&b->o, r == 0) == -1)
    r = -1;
  b->published = r == 0;
  if (b->published)
    rotate (b);
  return r;
}

/* NAME must be a checkpoint's name, as the server has them. */
static int
check_name (const char *name)
{
  if (checkpoint_name_valid (name))
    return 0;
  nbdcow_error ("backup: NAME \"%s\" is not a checkpoint's name: 1 to %d "
                "letters, digits, '_', '-' and '.', not starting with '-' "
                "or '.'", name, CHECKPOINT_NAME_MAX);
  return -1;
}

int
cmd_backup (int argc, char **argv)
{
  enum { OPT_BASE = 256, OPT_COMPRESS, OPT_CONNECTIONS, OPT_FREEZE, OPT_KEEP,
         OPT_PROGRESS, OPT_THAW };
  const struct option options[] = {
    { "base", required_argument, NULL, OPT_BASE },
    { "compress", no_argument, NULL, OPT_COMPRESS },
    { "connections", required_argument, NULL, OPT_CONNECTIONS },
    { "freeze", required_argument, NULL, OPT_FREEZE },
    { "keep-base-checkpoint", no_argument, NULL, OPT_KEEP },
    { "progress", no_argument, NULL, OPT_PROGRESS },
    { "thaw", required_argument, NULL, OPT_THAW },
    HELP_OPTION,
    { NULL, 0, NULL, 0 },
  };
  struct backup *b;
  char *out;
  int c, r;

  if (argc >= 2 && strcmp (argv[1], "prune") == 0)
    return cmd_backup_prune (argc - 1, argv + 1);
  if (argc >= 2 && strcmp (argv[1], "verify") == 0)
    return cmd_backup_verify (argc - 1, argv + 1);
  b = calloc (1, sizeof *b);
  if (b == NULL) {
    nbdcow_error ("backup: calloc: %m");
    return EXIT_ERROR;
  }
  b->connections = DEFAULT_CONNECTIONS;
  optind = 1;
  while ((c = subcommand_getopt (argc, argv, options)) != -1) {
    if (c == OPT_BASE)
      b->base = optarg;
    else if (c == OPT_COMPRESS)
      b->compress = true;
    else if (c == OPT_CONNECTIONS &&
             parse_connections (optarg, &b->connections) == -1)
      c = '?';
    else if (c == OPT_FREEZE)
      b->freeze = optarg;
    else if (c == OPT_KEEP)
      b->keep_base_checkpoint = true;
    else if (c == OPT_PROGRESS)
      b->progress = true;
    else if (c == OPT_THAW)
      b->thaw = optarg;
    if (c == 'h' || c == '?') {
      free (b);
      return c == 'h' ? EXIT_OK : EXIT_ERROR;
    }
  }
  if (argc - optind != 4) {
    nbdcow_error ("backup: expected SOCKET, URI, NAME and OUT");
    subcommand_usage ("backup", stderr);
    free (b);
    return EXIT_ERROR;
  }
  b->control = argv[optind];
  b->uri = argv[optind + 1];
  b->name = argv[optind + 2];
  /* Through a symbolic link, as qemu-img writes: the link stays. */
  out = through_links (argv[optind + 3]);
  if (out == NULL) {
    nbdcow_error ("%s: %m", argv[optind + 3]);
    free (b);
    return EXIT_ERROR;
  }
  b->out = out;
  b->out_named = argv[optind + 3];
  catch_signals ();
  b->status = EXIT_ERROR;
  r = check_name (b->name) == 0 && run_backup (b) == 0 ? EXIT_OK : b->status;
  end_client (b);
  if (r == EXIT_OK && b->thaw_failed)
    r = EXIT_ERROR;
  if (b->published)
    printf ("%s: backup \"%s\" of export \"%s\": %" PRIu64 " bytes of data "
            "and %" PRIu64 " bytes of zeros, %s%s\n", argv[optind + 3],
            b->name, b->export, b->copy.data_bytes, b->copy.zero_bytes,
            b->base ? "over " : "standalone", b->base ? b->base : "");
  view_copy_free (&b->copy);
  free (out);
  free (b);
  return r;
}
