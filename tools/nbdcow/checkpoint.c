/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdcow checkpoint: makes, deletes and lists the checkpoints of an
 * export of a running nbdkit, through the filter's control socket
 * (cow-control=SOCKET; the protocol is in filters/cow/control.h).
 */

#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "json.h"
#include "nbdcow.h"

/* The longest answer: "ok" and 32 names of at most 64 bytes, with room
 * for a message naming a long export.
 */
#define ANSWER_MAX 16384

/* Sends the command of the n bytes of request to the server at
 * socket_path and reads its answer into answer (ANSWER_MAX bytes, made
 * a string).  Returns EXIT_OK, or EXIT_UNUSABLE after saying why.
 */
static int
ask (const char *socket_path, const char *request, size_t n, char *answer)
{
  struct sockaddr_un addr = { .sun_family = AF_UNIX };
  size_t got = 0;
  ssize_t r;
  int fd;

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
  if (write (fd, request, n) != (ssize_t) n || shutdown (fd, SHUT_WR) == -1) {
    nbdcow_error ("%s: cannot send the command: %m", socket_path);
    close (fd);
    return EXIT_UNUSABLE;
  }
  while (got < ANSWER_MAX - 1 &&
         (r = read (fd, answer + got, ANSWER_MAX - 1 - got)) > 0)
    got += r;
  close (fd);
  answer[got] = '\0';
  if (strncmp (answer, "NBDMAGIC", 8) == 0) {
    nbdcow_error ("%s: an NBD server's socket (nbdkit -U), not a control "
                  "socket: give the path of cow-control=SOCKET", socket_path);
    return EXIT_UNUSABLE;
  }
  if (strncmp (answer, "ok\n", 3) != 0 && strncmp (answer, "error: ", 7) != 0) {
    nbdcow_error ("%s: no answer from the server", socket_path);
    return EXIT_UNUSABLE;
  }
  return EXIT_OK;
}

/* Prints the names of list's answer (after "ok\n"), a line each or as
 * JSON.
 */
static void
print_list (const char *names, const char *export, bool json)
{
  const char *p, *end;
  bool first = true;

  if (!json) {
    fputs (names, stdout);
    return;
  }
  printf ("{\"export\": ");
  json_write_string (stdout, export);
  printf (", \"checkpoints\": [");
  for (p = names; (end = strchr (p, '\n')) != NULL; p = end + 1) {
    printf ("%s\"%.*s\"", first ? "" : ", ", (int) (end - p), p);
    first = false;
  }
  printf ("]}\n");
}

int
cmd_checkpoint (int argc, char **argv)
{
  const struct option options[] = {
    { "json", no_argument, NULL, 'j' },
    HELP_OPTION,
    { NULL, 0, NULL, 0 },
  };
  char request[4096 + 256], answer[ANSWER_MAX];
  bool json = false, list;
  const char *verb, *export, *name;
  size_t n;
  int c, status;

  optind = 1;
  while ((c = subcommand_getopt (argc, argv, options)) != -1) {
    if (c == 'h')
      return EXIT_OK;
    if (c != 'j')
      return EXIT_ERROR;
    json = true;
  }
  argc -= optind;
  argv += optind;
  verb = argc > 0 ? argv[0] : "";
  list = strcmp (verb, "list") == 0;
  if ((!list && strcmp (verb, "create") != 0 && strcmp (verb, "delete") != 0)
      || argc != (list ? 3 : 4) || (json && !list)) {
    nbdcow_error ("checkpoint: expected create SOCKET EXPORT NAME, "
                  "delete SOCKET EXPORT NAME or [--json] list SOCKET EXPORT");
    subcommand_usage ("checkpoint", stderr);
    return EXIT_ERROR;
  }
  export = argv[2];
  name = list ? "" : argv[3];
  if (strlen (export) > 4096 || strlen (name) > 128) {
    nbdcow_error ("checkpoint: the export's name or the checkpoint's is "
                  "too long");
    return EXIT_ERROR;
  }
  n = snprintf (request, sizeof request, "%s%c%s%c", verb, 0, export, 0);
  if (!list)
    n += snprintf (request + n, sizeof request - n, "%s%c", name, 0);
  status = ask (argv[1], request, n, answer);
  if (status != EXIT_OK)
    return status;
  if (strncmp (answer, "error: ", 7) == 0) {
    answer[strcspn (answer, "\n")] = '\0';
    nbdcow_error ("%s: %s", argv[1], answer + 7);
    return EXIT_ERROR;
  }
  if (list)
    print_list (answer + 3, export, json);
  return EXIT_OK;
}
