/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The control socket and its thread (control.h). */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "blk.h"
#include "control.h"
#include "exports.h"

/* The longest command: three fields, an export name of up to 4096
 * bytes.
 */
#define COMMAND_MAX (16 + 4096 + CHECKPOINT_NAME_MAX + 3)

/* A client has this long to send its command and read the answer. */
#define CLIENT_TIMEOUT_SECONDS 5

/* Set by control_init and control_start, read by control_stop, all in
 * nbdkit's main thread.
 */
static const char *socket_path;
static int listen_fd = -1;
static struct stat socket_stat;         /* to remove only our own */
static pthread_t thread;
static bool thread_running;

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

/* Made before listen, so that no one connects before the mode is
 * 0600.
 */
int
control_init (const char *path)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };

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
      listen (listen_fd, 4) == -1) {
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

/* Carries out a command on the overlay of export, writing its answer
 * to out.
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

/* The fields of a command of verb: list EXPORT, or create or delete
 * EXPORT CHECKPOINT; 0 for a verb that is none.
 */
static size_t
fields_of (const char *verb)
{
  if (strcmp (verb, "list") == 0)
    return 2;
  if (strcmp (verb, "create") == 0 || strcmp (verb, "delete") == 0)
    return 3;
  return 0;
}

/* Carries out the command in the n bytes of buf, writing its answer to
 * out.
 */
static void
run_command (FILE *out, const char *buf, size_t n)
{
  const char *fields[3] = { NULL, NULL, NULL };
  size_t i, count = 0, start = 0;
  struct overlay *o;

  for (i = 0; i < n && count < 3; ++i)
    if (buf[i] == '\0') {
      fields[count++] = buf + start;
      start = i + 1;
    }
  if (count == 0 || start != n || count != fields_of (fields[0])) {
    fputs ("error: not a command: create EXPORT CHECKPOINT, "
           "delete EXPORT CHECKPOINT or list EXPORT\n", out);
    return;
  }
  o = exports_pin (fields[1]);
  if (o == NULL) {
    fprintf (out, "error: export \"%s\": no client has opened it\n",
             fields[1]);
    return;
  }
  run_on (out, o->blk, fields[0], fields[1], fields[2]);
  exports_unpin (o);
}

/* Writes the n bytes of buf to fd, as far as the client reads them. */
static void
write_all (int fd, const char *buf, size_t n)
{
  ssize_t r;

  for (; n > 0; buf += r, n -= r) {
    r = write (fd, buf, n);
    if (r <= 0)
      return;
  }
}

/* Reads one command from fd until the client's end of writing, and
 * answers it.
 */
static void
serve (int fd)
{
  struct timeval timeout = { .tv_sec = CLIENT_TIMEOUT_SECONDS };
  char buf[COMMAND_MAX + 1];
  size_t n = 0;
  ssize_t r = 1;
  char *answer = NULL;
  size_t answer_len = 0;
  FILE *out;

  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  while (n < sizeof buf && (r = read (fd, buf + n, sizeof buf - n)) > 0)
    n += r;
  if (r == -1)
    return;
  out = open_memstream (&answer, &answer_len);
  if (out == NULL)
    return;
  if (n > COMMAND_MAX)
    fputs ("error: the command is too long\n", out);
  else
    run_command (out, buf, n);
  if (fclose (out) == 0)
    write_all (fd, answer, answer_len);
  free (answer);
}

static void *
control_thread (void *arg)
{
  for (;;) {
    int fd = accept4 (listen_fd, NULL, NULL, SOCK_CLOEXEC);

    if (fd == -1) {
      if (errno == EINTR || errno == ECONNABORTED)
        continue;
      return NULL;              /* control_stop shut the socket down */
    }
    serve (fd);
    close (fd);
  }
}

int
control_start (void)
{
  int err;

  if (listen_fd == -1)
    return 0;
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
  shutdown (listen_fd, SHUT_RDWR);
  if (thread_running)
    pthread_join (thread, NULL);
  thread_running = false;
  close (listen_fd);
  listen_fd = -1;
  if (lstat (socket_path, &st) == 0 && st.st_dev == socket_stat.st_dev &&
      st.st_ino == socket_stat.st_ino)
    unlink (socket_path);
}
