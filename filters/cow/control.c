/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The control socket and its thread (control.h). */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "blk.h"
#include "changesname.h"
#include "control.h"
#include "dirpath.h"
#include "exports.h"
#include "monotonic.h"
#include "params.h"
#include "registry.h"

/* The longest command: three fields, an export name of up to 4096
 * bytes.
 */
#define COMMAND_MAX (16 + 4096 + CHECKPOINT_NAME_MAX + 3)

/* A client has this long to send its command and read the answer. */
#define CLIENT_TIMEOUT_NS UINT64_C (5000000000)

/* The longest export name the NBD protocol carries. */
#define NBD_NAME_MAX 4096

/* The clients served at once.  A new one past them takes the place of
 * the one connected first.
 */
#define CLIENTS_MAX 64

/* Set by control_init and control_start, read by control_stop, all in
 * nbdkit's main thread.
 */
static const char *socket_path;
static int listen_fd = -1;
static struct stat socket_stat;         /* to remove only our own */
static pthread_t thread;
static bool thread_running;
static int stop_pipe[2] = { -1, -1 };    /* control_stop to the thread */

/* Whether a server listens on the socket at path. */
static bool
listened_on (const struct sockaddr_un *addr)
{
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  bool live;

  if (fd == -1)
    return true;
  live = connect (fd, (const struct sockaddr *) addr, sizeof *addr) == 0 ||
         errno != ECONNREFUSED;
  close (fd);
  return live;
}

/* Makes room for the socket at path: nothing there, or a socket left
 * by a server that stopped.  Returns 0, or -1 after nbdkit_error.
 */
static int
clear_path (const char *path, const struct sockaddr_un *addr)
{
  struct stat st;

  if (lstat (path, &st) == -1)
    return 0;
  if (!S_ISSOCK (st.st_mode)) {
    nbdkit_error ("cow-control=%s: exists and is not a socket", path);
    return -1;
  }
  if (listened_on (addr)) {
    nbdkit_error ("cow-control=%s: another server listens on it", path);
    return -1;
  }
  if (unlink (path) == -1) {
    nbdkit_error ("cow-control=%s: cannot remove the old socket: %m", path);
    return -1;
  }
  return 0;
}

/* The directory holding path, with every link followed, malloc'd, or
 * NULL if it cannot be found.
 */
static char *
real_dir_of (const char *path)
{
  char *dir = dir_of (path), *real;

  if (dir == NULL)
    return NULL;
  real = realpath (dir, NULL);
  free (dir);
  return real;
}

/* Whether a and b name the same place: the same last component in
 * the same directory (or, where a directory cannot be found, the same
 * string).
 */
static bool
same_place (const char *a, const char *b)
{
  const char *a_name = strrchr (a, '/'), *b_name = strrchr (b, '/');
  char *a_dir, *b_dir;
  bool same;

  if (strcmp (a_name ? a_name + 1 : a, b_name ? b_name + 1 : b) != 0)
    return false;
  a_dir = real_dir_of (a);
  b_dir = real_dir_of (b);
  same = a_dir && b_dir ? strcmp (a_dir, b_dir) == 0 : strcmp (a, b) == 0;
  free (a_dir);
  free (b_dir);
  return same;
}

/* Made before listen, so that no one connects before the mode is
 * 0600.
 */
int
control_init (const char *path, const char *nbd_socket)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };

  if (nbd_socket && same_place (path, nbd_socket)) {
    nbdkit_error ("cow-control=%s: nbdkit serves NBD on this socket "
                  "(-U %s): the control socket needs a path of its own",
                  path, nbd_socket);
    return -1;
  }

  if (strlen (path) >= sizeof addr.sun_path) {
    nbdkit_error ("cow-control=%s: longer than a socket's path can be "
                  "(%zu bytes)", path, sizeof addr.sun_path - 1);
    return -1;
  }
  strcpy (addr.sun_path, path);
  if (clear_path (path, &addr) == -1)
    return -1;
  listen_fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (listen_fd == -1 ||
      bind (listen_fd, (struct sockaddr *) &addr, sizeof addr) == -1) {
    nbdkit_error ("cow-control=%s: cannot make the socket: %m", path);
    goto fail;
  }
  if (chmod (path, 0600) == -1 || lstat (path, &socket_stat) == -1 ||
      listen (listen_fd, CLIENTS_MAX) == -1) {
    nbdkit_error ("cow-control=%s: cannot listen: %m", path);
    unlink (path);
    goto fail;
  }
  socket_path = path;
  return 0;
 fail:
  if (listen_fd >= 0)
    close (listen_fd);
  listen_fd = -1;
  return -1;
}

/* Answers "error: " and what errno err means for a command on
 * export's checkpoint.
 */
static void
say_failure (FILE *out, int err, const char *export, const char *checkpoint)
{
  fprintf (out, "error: export \"%s\": ", export);
  switch (err) {
  case EINVAL:
    fprintf (out, "\"%s\" cannot name a checkpoint: 1 to %d letters, "
             "digits, '_', '-' and '.', not starting with '-' or '.'",
             checkpoint, CHECKPOINT_NAME_MAX);
    break;
  case EEXIST:
    fprintf (out, "it has a checkpoint \"%s\" already", checkpoint);
    break;
  case EMLINK:
    fprintf (out, "it has %d checkpoints, the most it can have: delete one "
             "first", CHECKPOINTS_MAX);
    break;
  case EAGAIN:
    fprintf (out, "no client has opened it yet");
    break;
  case EOVERFLOW:
    fprintf (out, "it has made all the checkpoints it can");
    break;
  case EOPNOTSUPP:
    fprintf (out, "its cow-file is of an older format, which keeps no "
             "checkpoints (a new file keeps them)");
    break;
  case ENOENT:
    fprintf (out, "it has no checkpoint \"%s\"", checkpoint);
    break;
  default:
    fprintf (out, "%s", strerror (err));
  }
  fputc ('\n', out);
}

/* Answers "error: " and what errno err means for a command on
 * export's view.
 */
static void
say_view_failure (FILE *out, int err, const char *export, const char *view,
                  struct blk *blk)
{
  char name[CHECKPOINT_NAME_MAX + 1];
  uint64_t kept;

  switch (err) {
  case EBUSY:
    blk_view_get (blk, name, &kept);
    fprintf (out, "error: export \"%s\": it has a view \"%s\" already "
             "(an export has one at a time): delete it first\n", export,
             name);
    break;
  case EOPNOTSUPP:
    fprintf (out, "error: export \"%s\": its cow-file is of format "
             "version 5 or older, which keeps no views (a new file keeps "
             "them)\n", export);
    break;
  case ENOENT:
    fprintf (out, "error: export \"%s\": it has no view \"%s\"\n",
             export, view);
    break;
  case ESTALE:
    fprintf (out, "error: export \"%s\": view \"%s\" %s; its checkpoint "
             "\"%s\" remains\n", export, view,
             blk_view_ended_why (params.lifetime_clients), view);
    break;
  default:
    say_failure (out, err, export, view);
  }
}

/* Writes the export name that reads view of export, with a newline. */
static void
write_view_export (FILE *out, const char *export, const char *view)
{
  fprintf (out, "%s%c%s\n", export, params.view_separator, view);
}

/* Carries out a command on the view of export's overlay, writing its
 * answer to out: "view" answers its name, state, bytes kept, the
 * export name that reads it and the start of those that read its
 * changes, a line each (nothing if it has none; if it ended with the
 * server or overlay that made it, an empty line and why; a deleted
 * view's places still going back, its name, "giving-back", the blocks
 * left to look at and two empty lines);
 * "view-create" the export name that reads it.
 */
static void
run_view (FILE *out, struct blk *blk, const char *verb, const char *export,
          const char *view)
{
  char name[CHECKPOINT_NAME_MAX + 1];
  enum blk_view_state state;
  uint64_t kept;
  int r;

  if (strcmp (verb, "view") == 0) {
    state = blk_view_get (blk, name, &kept);
    fputs ("ok\n", out);
    if (state == BLK_VIEW_NONE && blk_view_giving_back (blk, name, &kept))
      fprintf (out, "%s\ngiving-back\n%" PRIu64 "\n\n\n", name, kept);
    if (state == BLK_VIEW_NONE)
      return;
    fprintf (out, "%s\n%s\n%" PRIu64 "\n", name,
             blk_view_state_name (state), kept);
    if (state == BLK_VIEW_ENDED) {        /* no export reads it: why */
      fprintf (out, "\n%s\n", blk_view_ended_why (params.lifetime_clients));
      return;
    }
    write_view_export (out, export, name);
    if (params.changes_separator)
      fprintf (out, "%s%c%s%c", export, params.view_separator, name,
               params.changes_separator);
    fputc ('\n', out);
    return;
  }
  if (strcmp (verb, "view-create") == 0 && params.view_separator == '\0') {
    fprintf (out, "error: export \"%s\": the server has no "
             "cow-view-separator, so no client could read a view\n", export);
    return;
  }

  r = strcmp (verb, "view-create") == 0 ? blk_view_create (blk, view)
                                         : blk_view_delete (blk, view);
  if (r == -1) {
    say_view_failure (out, errno, export, view, blk);
    return;
  }
  nbdkit_debug ("cow: control: %s \"%s\" of export \"%s\"", verb, view,
                export);
  fputs ("ok\n", out);
  if (strcmp (verb, "view-create") == 0)
    write_view_export (out, export, view);
}

/* The commands: each verb, how many fields its command has (the verb
 * included), and whether it acts on the export's view (run_view) or
 * its checkpoints (run_on).
 */
struct command {
  const char *verb;
  size_t fields;
  bool on_view;
};

static const struct command commands[] = {
  { "create", 3, false },       /* create EXPORT CHECKPOINT */
  { "delete", 3, false },       /* delete EXPORT CHECKPOINT */
  { "list", 2, false },         /* list EXPORT */
  { "identify", 3, false },     /* identify EXPORT CHECKPOINT */
  { "view-create", 3, true },   /* view-create EXPORT VIEW */
  { "view-delete", 3, true },   /* view-delete EXPORT VIEW */
  { "view", 2, true },          /* view EXPORT */
};

/* The command of verb, or NULL if there is none. */
static const struct command *
command_of (const char *verb)
{
  size_t i;

  for (i = 0; i < sizeof commands / sizeof commands[0]; ++i)
    if (strcmp (commands[i].verb, verb) == 0)
      return &commands[i];
  return NULL;
}

/* Carries out a command on the checkpoints of export's overlay,
 * writing its answer to out.
 */
static void
run_on (FILE *out, struct blk *blk, const char *verb, const char *export,
        const char *checkpoint)
{
  struct checkpoint list[CHECKPOINTS_MAX];
  unsigned n, i;
  int r;

  if (strcmp (verb, "list") == 0) {
    n = blk_checkpoint_list (blk, list);
    fputs ("ok\n", out);
    for (i = 0; i < n; ++i)
      fprintf (out, "%s\n", list[i].name);
    return;
  }
  if (strcmp (verb, "identify") == 0) {
    uint64_t id;
    uint32_t epoch;

    if (blk_checkpoint_identity (blk, checkpoint, &id, &epoch) == -1) {
      say_failure (out, errno, export, checkpoint);
      return;
    }
    fprintf (out, "ok\n%016" PRIx64 "-%" PRIu32 "\n", id, epoch);
    return;
  }
  if (strcmp (verb, "create") == 0)
    r = blk_checkpoint_create (blk, checkpoint);
  else
    r = blk_checkpoint_delete (blk, checkpoint);
  if (r == -1) {
    say_failure (out, errno, export, checkpoint);
    return;
  }
  nbdkit_debug ("cow: control: %s checkpoint \"%s\" of export \"%s\"", verb,
                checkpoint, export);
  fputs ("ok\n", out);
}

/* Whether name is a view's (a changes view or a point-in-time view,
 * which no command acts on), answering "error: " and which export it
 * views if so.
 */
static bool
refuse_view_name (FILE *out, const char *name)
{
  char *changed = NULL, *viewed = NULL;
  const char *checkpoint, *view;
  int changes = changes_view_name (name, params.changes_separator, &changed,
                                   &checkpoint);
  int instant = changes == -1 ? -1 :
    instant_view_name (changed ? changed : name, params.view_separator,
                       &viewed, &view);

  if (changes == -1 || instant == -1)
    fprintf (out, "error: export \"%s\": %s\n", name, strerror (errno));
  else if (changes == 1 || instant == 1)
    fprintf (out, "error: export \"%s\": the name of a view of export "
             "\"%s\", not of an export: give the export's own name\n",
             name, viewed ? viewed : changed);
  free (changed);
  free (viewed);
  return changes != 0 || instant != 0;
}

/* Carries out the command in the n bytes of buf, writing its answer to
 * out.
 */
static void
run_command (FILE *out, const char *buf, size_t n)
{
  const char *fields[3] = { NULL, NULL, NULL };
  const struct command *command;
  size_t i, count = 0, start = 0;
  struct overlay *o;

  for (i = 0; i < n && count < 3; ++i)
    if (buf[i] == '\0') {
      fields[count++] = buf + start;
      start = i + 1;
    }
  command = count ? command_of (fields[0]) : NULL;
  if (command == NULL || start != n || count != command->fields) {
    fputs ("error: not a command: create EXPORT CHECKPOINT, "
           "delete EXPORT CHECKPOINT, list EXPORT, identify EXPORT "
           "CHECKPOINT, view-create EXPORT VIEW, view-delete EXPORT VIEW or "
           "view EXPORT\n", out);
    return;
  }
  if (strcmp (fields[0], "view-create") == 0 &&
      strlen (fields[1]) + 1 + strlen (fields[2]) > NBD_NAME_MAX) {
    fprintf (out, "error: export \"%s\": the name of view \"%s\" of it "
             "would be longer than the %d bytes NBD carries\n", fields[1],
             fields[2], NBD_NAME_MAX);
    return;
  }
  if (refuse_view_name (out, fields[1]))
    return;
  o = exports_pin_or_start (fields[1]);
  if (o == NULL) {
    fprintf (out, "error: export \"%s\": no client has opened it\n",
             fields[1]);
    return;
  }
  if (command->on_view)
    run_view (out, o->blk, fields[0], fields[1], fields[2]);
  else
    run_on (out, o->blk, fields[0], fields[1], fields[2]);
  registry_unpin (o);
}

/* A client being served: its command read in, then its answer
 * written out, all before its deadline.
 */
struct client {
  int fd;                       /* -1: a free place */
  uint64_t deadline;            /* monotonic_ns */
  size_t n;                     /* bytes of buf read */
  bool eof;                     /* the client's end of writing read */
  char buf[COMMAND_MAX + 1];
  char *answer;                 /* NULL until the command has run */
  size_t answer_len, answer_sent;
};

static struct client clients[CLIENTS_MAX];

static void
drop (struct client *c)
{
  close (c->fd);
  free (c->answer);
  c->fd = -1;
  c->answer = NULL;
}

/* Runs c's command, read in whole (or too long), making its answer. */
static void
answer (struct client *c)
{
  FILE *out = open_memstream (&c->answer, &c->answer_len);

  if (out == NULL) {
    drop (c);
    return;
  }
  if (c->n > COMMAND_MAX)
    fputs ("error: the command is too long\n", out);
  else
    run_command (out, c->buf, c->n);
  if (fclose (out) != 0) {
    c->answer = NULL;
    drop (c);
  }
}

/* What a read or write of a client's socket that returned r means:
 * 1 go on, 0 wait for the socket, -1 the client is gone (dropped).
 */
static int
moved (struct client *c, ssize_t r)
{
  if (r >= 0 || errno == EINTR)
    return 1;
  if (errno == EAGAIN || errno == EWOULDBLOCK)
    return 0;
  drop (c);
  return -1;
}

/* Moves c on as far as its socket lets it without waiting: reads its
 * command to the end of its writing (or as much as a command can be),
 * runs it, writes the answer, reads and drops what a client sending a
 * command too long still sends, so that it reads the answer, and drops
 * the client when done or failed.
 */
static void
step (struct client *c)
{
  char sink[4096];
  ssize_t r;

  while (c->answer == NULL) {
    r = read (c->fd, c->buf + c->n, sizeof c->buf - c->n);
    if (moved (c, r) <= 0)
      return;
    if (r < 0)
      continue;
    c->n += r;
    c->eof = r == 0;
    if (c->eof || c->n == sizeof c->buf)
      answer (c);
    if (c->fd == -1)
      return;
  }
  while (c->answer_sent < c->answer_len) {
    r = write (c->fd, c->answer + c->answer_sent,
               c->answer_len - c->answer_sent);
    if (moved (c, r) <= 0)
      return;
    if (r > 0)
      c->answer_sent += r;
  }
  while (!c->eof) {
    r = read (c->fd, sink, sizeof sink);
    if (moved (c, r) <= 0)
      return;
    c->eof = r == 0;
  }
  drop (c);
}

/* What c waits for. */
static short
awaits (const struct client *c)
{
  return c->answer && c->answer_sent < c->answer_len ? POLLOUT : POLLIN;
}

/* Takes a new client into a free place, or into the place of the one
 * whose deadline comes first, so that no number of clients that send
 * nothing keeps a new one out.
 */
static void
accept_client (uint64_t now)
{
  struct client *c = &clients[0];
  int fd = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
  size_t i;

  if (fd == -1)
    return;
  for (i = 0; i < CLIENTS_MAX && c->fd != -1; ++i)
    if (clients[i].fd == -1 || clients[i].deadline < c->deadline)
      c = &clients[i];
  if (c->fd != -1)
    drop (c);
  c->fd = fd;
  c->deadline = now + CLIENT_TIMEOUT_NS;
  c->n = 0;
  c->eof = false;
  c->answer_len = c->answer_sent = 0;
  step (c);
}

/* Serves every client at once, each moved on as its socket is ready,
 * until control_stop writes to stop_pipe.
 */
static void *
control_thread (void *arg)
{
  struct pollfd fds[CLIENTS_MAX + 2];
  size_t i;

  for (i = 0; i < CLIENTS_MAX; ++i)
    clients[i].fd = -1;
  for (;;) {
    uint64_t now = monotonic_ns (), next = now + CLIENT_TIMEOUT_NS;

    fds[0] = (struct pollfd) { .fd = stop_pipe[0], .events = POLLIN };
    fds[1] = (struct pollfd) { .fd = listen_fd, .events = POLLIN };
    for (i = 0; i < CLIENTS_MAX; ++i) {
      struct client *c = &clients[i];

      if (c->fd != -1 && c->deadline <= now)
        drop (c);
      fds[i + 2] = (struct pollfd) { .fd = c->fd, .events = awaits (c) };
      if (c->fd != -1 && c->deadline < next)
        next = c->deadline;
    }
    if (poll (fds, CLIENTS_MAX + 2, (next - now) / 1000000 + 1) == -1 &&
        errno != EINTR)
      break;
    if (fds[0].revents)
      break;
    for (i = 0; i < CLIENTS_MAX; ++i)
      if (fds[i + 2].revents && clients[i].fd != -1)
        step (&clients[i]);
    if (fds[1].revents & POLLIN)
      accept_client (monotonic_ns ());
  }
  for (i = 0; i < CLIENTS_MAX; ++i)
    if (clients[i].fd != -1)
      drop (&clients[i]);
  return NULL;
}

int
control_start (void)
{
  int err;

  if (listen_fd == -1)
    return 0;
  if (pipe2 (stop_pipe, O_CLOEXEC) == -1) {
    nbdkit_error ("cow-control=%s: pipe: %m", socket_path);
    return -1;
  }
  err = pthread_create (&thread, NULL, control_thread, NULL);
  if (err) {
    errno = err;
    nbdkit_error ("cow-control=%s: cannot start its thread: %m",
                  socket_path);
    return -1;
  }
  thread_running = true;
  return 0;
}

void
control_stop (void)
{
  struct stat st;

  if (listen_fd == -1)
    return;
  if (thread_running) {
    while (write (stop_pipe[1], "", 1) == -1 && errno == EINTR)
      ;
    pthread_join (thread, NULL);
  }
  thread_running = false;
  if (stop_pipe[0] >= 0) {
    close (stop_pipe[0]);
    close (stop_pipe[1]);
    stop_pipe[0] = stop_pipe[1] = -1;
  }
  close (listen_fd);
  listen_fd = -1;
  if (lstat (socket_path, &st) == 0 && st.st_dev == socket_stat.st_dev &&
      st.st_ino == socket_stat.st_ino)
    unlink (socket_path);
}
