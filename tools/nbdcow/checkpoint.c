/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow checkpoint and nbdcow view: makes, deletes and lists the
 * checkpoints of an export of a running nbdkit, and its point-in-time
 * view, through the filter's control socket (cow-control=SOCKET; the
 * protocol is in filters/cow/control.h); and the client of that socket
 * that nbdcow backup uses too.
 */

#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include "checkpoint.h"
#include "json.h"
#include "nbdcow.h"

/* How long the server has to answer, in seconds, unless
 * $NBDCOW_CONTROL_TIMEOUT says otherwise (the man page).
 */
#define CONTROL_TIMEOUT 120

static unsigned
control_timeout (void)
{
  const char *s = getenv ("NBDCOW_CONTROL_TIMEOUT");
  char *end;
  unsigned long t;

  if (s == NULL || *s == '\0')
    return CONTROL_TIMEOUT;
  errno = 0;
  t = strtoul (s, &end, 10);
  return errno || *end || t == 0 || t > 86400 ? CONTROL_TIMEOUT : t;
}

/* Reads the answer on fd into answer (CONTROL_ANSWER_MAX bytes, made a
 * string), within the timeout tv.  Returns EXIT_OK, or EXIT_UNUSABLE
 * after saying why: no answer in time, or one too long.
 */
static int
read_answer (const char *socket_path, int fd, const struct timeval *tv,
             char *answer)
{
  size_t got = 0;
  ssize_t r = 0;
  char more;

  setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, tv, sizeof *tv);
  /* A signal (nbdcow backup stops on one) does not cut the answer. */
  while (got < CONTROL_ANSWER_MAX - 1 &&
         ((r = read (fd, answer + got, CONTROL_ANSWER_MAX - 1 - got)) > 0 ||
          (r == -1 && errno == EINTR)))
    got += r > 0 ? r : 0;
  answer[got] = '\0';
  if (r == -1 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    nbdcow_error ("%s: no answer from the server in %ld s", socket_path,
                  (long) tv->tv_sec);
    return EXIT_UNUSABLE;
  }
  if (got == CONTROL_ANSWER_MAX - 1 && read (fd, &more, 1) == 1) {
    nbdcow_error ("%s: an answer longer than %d bytes, which the server "
                  "does not give", socket_path, CONTROL_ANSWER_MAX - 1);
    return EXIT_UNUSABLE;
  }
  return EXIT_OK;
}

/* Sends the command of the n bytes of request to the server at
 * socket_path and reads its answer into answer (CONTROL_ANSWER_MAX bytes, made
 * a string).  Returns EXIT_OK, or EXIT_UNUSABLE after saying why.
 */
static int
ask (const char *socket_path, const char *request, size_t n, char *answer)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  struct timeval tv = { .tv_sec = control_timeout () };
  int fd, status;

  if (strlen (socket_path) >= sizeof addr.sun_path) {
    nbdcow_error ("%s: too long for a socket's path", socket_path);
    return EXIT_UNUSABLE;
  }
  strcpy (addr.sun_path, socket_path);
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd == -1 ||
      connect (fd, (struct sockaddr *) &addr, sizeof addr) == -1) {
    nbdcow_error ("%s: cannot connect: %m (is nbdkit running with "
                  "cow-control=%s?)", socket_path, socket_path);
    if (fd >= 0)
      close (fd);
    return EXIT_UNUSABLE;
  }
  setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  /* send, not write: a server gone leaves EPIPE, not a SIGPIPE. */
  if (send (fd, request, n, MSG_NOSIGNAL) != (ssize_t) n ||
      shutdown (fd, SHUT_WR) == -1) {
    nbdcow_error ("%s: cannot send the command: %m", socket_path);
    close (fd);
    return EXIT_UNUSABLE;
  }
  status = read_answer (socket_path, fd, &tv, answer);
  close (fd);
  if (status != EXIT_OK)
    return status;
  if (strncmp (answer, "NBDMAGIC", 8) == 0) {
    nbdcow_error ("%s: an NBD server's socket (nbdkit -U), not a control "
                  "socket: give the path of cow-control=SOCKET", socket_path);
    return EXIT_UNUSABLE;
  }
  if (strncmp (answer, "ok\n", 3) != 0 && strncmp (answer, "error: ", 7) != 0) {
    nbdcow_error ("%s: no answer from the server", socket_path);
    return EXIT_UNUSABLE;
  }
  if (answer[strlen (answer) - 1] != '\n') {
    nbdcow_error ("%s: the server's answer is cut short", socket_path);
    return EXIT_UNUSABLE;
  }
  return EXIT_OK;
}

bool
control_next_line (const char **lines, char *line, size_t size)
{
  const char *end = strchr (*lines, '\n');
  size_t n;

  if (end == NULL)
    return false;
  n = end - *lines;
  if (n >= size)
    return false;
  memcpy (line, *lines, n);
  line[n] = '\0';
  *lines = end + 1;
  return true;
}

/* Whether v is a deleted view whose places are still going back. */
static bool
giving_back (const struct control_view *v)
{
  return strcmp (v->state, "giving-back") == 0;
}

int
control_read_view (const char *lines, struct control_view *v)
{
  char kept[32], *end;
  unsigned long long number;

  if (*lines == '\0')
    return 0;
  if (!control_next_line (&lines, v->name, sizeof v->name) ||
      !control_next_line (&lines, v->state, sizeof v->state) ||
      !control_next_line (&lines, kept, sizeof kept) ||
      !control_next_line (&lines, v->export, sizeof v->export) ||
      !control_next_line (&lines, v->changes, sizeof v->changes) ||
      *lines != '\0' || !checkpoint_name_valid (v->name) ||
      kept[0] < '0' || kept[0] > '9')
    return -1;
  if (strcmp (v->state, "ended") == 0
      ? v->export[0] != '\0'
      : giving_back (v)
      ? v->export[0] != '\0' || v->changes[0] != '\0'
      : (strcmp (v->state, "live") != 0 && strcmp (v->state, "broken") != 0)
        || v->export[0] == '\0')
    return -1;
  errno = 0;
  number = strtoull (kept, &end, 10);
  if (errno || *end)
    return -1;
  strcpy (v->why, strcmp (v->state, "ended") == 0 ? v->changes : "");
  if (v->why[0])
    v->changes[0] = '\0';
  v->kept_bytes = giving_back (v) ? 0 : number;
  v->blocks_left = giving_back (v) ? number : 0;
  return 1;
}

/* Prints the names of list's answer (after "ok\n"), a line each or as
 * JSON.  Returns EXIT_OK, or EXIT_UNUSABLE after saying that a line
 * names no checkpoint, which the server never answers.
 */
static int
print_list (const char *socket_path, const char *names, const char *export,
            bool json)
{
  char name[CONTROL_LINE_MAX];
  const char *p = names;
  bool first = true;

  while (control_next_line (&p, name, sizeof name))
    if (!checkpoint_name_valid (name)) {
      nbdcow_error ("%s: the server's list holds a line that names no "
                    "checkpoint", socket_path);
      return EXIT_UNUSABLE;
    }
  if (!json) {
    fputs (names, stdout);
    return EXIT_OK;
  }
  printf ("{\"export\": ");
  json_write_string (stdout, export);
  printf (", \"checkpoints\": [");
  while (control_next_line (&names, name, sizeof name)) {
    printf ("%s", first ? "" : ", ");
    json_write_string (stdout, name);
    first = false;
  }
  printf ("]}\n");
  return EXIT_OK;
}

int
control_command (const char *socket_path, const char *verb, const char *export,
         const char *name, char *answer, const char **lines)
{
  const char *what = strncmp (verb, "view", 4) ? "checkpoint" : "view";
  char request[4096 + 256];
  size_t n;
  int status;

  if (strlen (export) > 4096 || (name && strlen (name) > 128)) {
    nbdcow_error ("%s: the export's name or the %s's is too long",
                  socket_path, what);
    return EXIT_ERROR;
  }
  if (strchr (export, '\n') || (name && strchr (name, '\n'))) {
    nbdcow_error ("%s: the export's name or the %s's holds a newline, which "
                  "the control socket's answers cannot carry", socket_path,
                  what);
    return EXIT_ERROR;
  }
  n = snprintf (request, sizeof request, "%s%c%s%c", verb, 0, export, 0);
  if (name)
    n += snprintf (request + n, sizeof request - n, "%s%c", name, 0);
  status = ask (socket_path, request, n, answer);
  if (status != EXIT_OK)
    return status;
  if (strncmp (answer, "error: ", 7) == 0) {
    answer[strcspn (answer, "\n")] = '\0';
    nbdcow_error ("%s: %s", socket_path,
                  answer[7] ? answer + 7 : "the server refused the command "
                  "without saying why");
    return EXIT_ERROR;
  }
  *lines = answer + 3;
  return EXIT_OK;
}

/* Reads the words of nbdcow what: VERB SOCKET EXPORT [NAME], VERB one
 * of create, delete and query, which alone takes --json and no NAME.
 * Returns EXIT_OK with *words at VERB (NULL after --help) and *json
 * set, or EXIT_ERROR after saying why.
 */
static int
read_words (int argc, char **argv, const char *what, const char *query,
            char ***words, bool *json)
{
  const struct option options[] = {
    { "json", no_argument, NULL, 'j' },
    HELP_OPTION,
    { NULL, 0, NULL, 0 },
  };
  const char *verb;
  bool queried;
  int c;

  *words = NULL;
  *json = false;
  optind = 1;
  while ((c = subcommand_getopt (argc, argv, options)) != -1) {
    if (c == 'h')
      return EXIT_OK;
    if (c != 'j')
      return EXIT_ERROR;
    *json = true;
  }
  argc -= optind;
  argv += optind;
  verb = argc > 0 ? argv[0] : "";
  queried = strcmp (verb, query) == 0;
  if ((!queried && strcmp (verb, "create") != 0 &&
       strcmp (verb, "delete") != 0) ||
      argc != (queried ? 3 : 4) || (*json && !queried)) {
    nbdcow_error ("%s: expected create SOCKET EXPORT NAME, delete SOCKET "
                  "EXPORT NAME or [--json] %s SOCKET EXPORT", what, query);
    subcommand_usage (what, stderr);
    return EXIT_ERROR;
  }
  *words = argv;
  return EXIT_OK;
}

int
cmd_checkpoint (int argc, char **argv)
{
  char answer[CONTROL_ANSWER_MAX], **words;
  const char *lines;
  bool json, list;
  int status;

  status = read_words (argc, argv, "checkpoint", "list", &words, &json);
  if (status != EXIT_OK || words == NULL)
    return status;
  list = strcmp (words[0], "list") == 0;
  status = control_command (words[1], words[0], words[2],
                            list ? NULL : words[3], answer, &lines);
  if (status == EXIT_OK && list)
    return print_list (words[1], lines, words[2], json);
  return status;
}

/* Prints the answer of view: the view's name, state, bytes kept and
 * export name, if the export has a view.  Returns EXIT_OK, or
 * EXIT_UNUSABLE after saying the answer is not one the server gives.
 */
static int
print_view (const char *socket_path, const char *lines, const char *export,
            bool json)
{
  struct control_view v;
  int any = control_read_view (lines, &v);

  if (any == -1) {
    nbdcow_error ("%s: the answer does not show a view", socket_path);
    return EXIT_UNUSABLE;
  }
  if (!json && !any)
    return EXIT_OK;
  if (!json && giving_back (&v)) {
    printf ("view: %s\nstate: %s\nblocks_left: %llu\n"
            "note: view %s was deleted; the places only it kept go back "
            "to the overlay's filesystem in the background (%llu blocks "
            "left to look at)\n", v.name, v.state, v.blocks_left, v.name,
            v.blocks_left);
    return EXIT_OK;
  }
  if (!json) {
    printf ("view: %s\nstate: %s\nkept_bytes: %llu\n", v.name, v.state,
            v.kept_bytes);
    if (v.export[0])
      printf ("export: %s\n", v.export);
    else
      printf ("note: view %s %s; its checkpoint %s remains\n", v.name,
              v.why[0] ? v.why
              : "ended with the nbdkit that made it (views do not survive "
                "a restart of nbdkit)", v.name);
    return EXIT_OK;
  }
  printf ("{\"export\": ");
  json_write_string (stdout, export);
  if (any) {
    printf (", \"view\": {\"name\": ");
    json_write_string (stdout, v.name);
    printf (", \"state\": ");
    json_write_string (stdout, v.state);
    printf (", \"kept_bytes\": %llu, ", v.kept_bytes);
    if (giving_back (&v))
      printf ("\"blocks_left\": %llu, ", v.blocks_left);
    printf ("\"export\": ");
    if (v.export[0])
      json_write_string (stdout, v.export);
    else
      printf ("null");
    printf ("}}\n");
  }
  else
    printf (", \"view\": null}\n");
  return EXIT_OK;
}

/* Prints the answer of view-create: the export name that reads the
 * view, one line.  Returns EXIT_OK, or EXIT_UNUSABLE after saying the
 * answer is not that.
 */
static int
print_created (const char *socket_path, const char *lines)
{
  char view_export[CONTROL_LINE_MAX];

  if (!control_next_line (&lines, view_export, sizeof view_export) ||
      view_export[0] == '\0' || *lines != '\0') {
    nbdcow_error ("%s: the answer does not name the view's export",
                  socket_path);
    return EXIT_UNUSABLE;
  }
  printf ("%s\n", view_export);
  return EXIT_OK;
}

int
cmd_view (int argc, char **argv)
{
  char answer[CONTROL_ANSWER_MAX], verb[16], **words;
  const char *lines;
  bool json, show;
  int status;

  status = read_words (argc, argv, "view", "show", &words, &json);
  if (status != EXIT_OK || words == NULL)
    return status;
  show = strcmp (words[0], "show") == 0;
  snprintf (verb, sizeof verb, show ? "view" : "view-%s", words[0]);
  status = control_command (words[1], verb, words[2], show ? NULL : words[3],
                            answer, &lines);
  if (status != EXIT_OK)
    return status;
  if (show)
    return print_view (words[1], lines, words[2], json);
  if (strcmp (words[0], "create") == 0)
    return print_created (words[1], lines);
  return EXIT_OK;
}
