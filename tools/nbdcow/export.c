/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* nbdcow export: the overlay as a qcow2 file over the raw base, made by
 * qemu-img and written through qemu-nbd by the engine of commit.
 */

#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

#include "commit.h"

/* qemu-nbd gets this long to listen on its socket, in ms. */
#define SERVER_START_MS 30000

/* Starts argv[0] from PATH; it dies with us if we die first.  Returns
 * its pid, or -1 after a message.
 */
static pid_t
spawn (char *const argv[])
{
  pid_t pid = fork ();

  if (pid == -1) {
    nbdcow_error ("fork: %m");
    return -1;
  }
  if (pid == 0) {
    prctl (PR_SET_PDEATHSIG, SIGTERM);
    execvp (argv[0], argv);
    nbdcow_error ("%s: %m", argv[0]);
    _exit (127);
  }
  return pid;
}

/* Waits for pid and says how it ended.  Returns 0 if it exited 0. */
static int
wait_for (pid_t pid, const char *name)
{
  int status;

  while (waitpid (pid, &status, 0) == -1)
    if (errno != EINTR) {
      nbdcow_error ("waitpid: %m");
      return -1;
    }
  if (WIFEXITED (status) && WEXITSTATUS (status) == 0)
    return 0;
  if (WIFEXITED (status))
    nbdcow_error ("%s failed (exit status %d)", name, WEXITSTATUS (status));
  else
    nbdcow_error ("%s killed by signal %d", name, WTERMSIG (status));
  return -1;
}

static int
run (char *const argv[])
{
  pid_t pid = spawn (argv);

  return pid == -1 ? -1 : wait_for (pid, argv[0]);
}

/* Whether an NBD server answers at uri: a whole handshake, so that the
 * server sees a client come and go cleanly.
 */
static bool
serving (const char *uri)
{
  struct nbd_handle *h = nbd_create ();
  bool ok = h && nbd_connect_uri (h, uri) == 0;

  if (ok)
    nbd_shutdown (h, 0);
  nbd_close (h);
  return ok;
}

/* Serves the qcow2 file out on the socket sock (uri) with qemu-nbd, for
 * up to connections clients at once.  Returns its pid once it listens, or
 * -1 after a message.
 */
static pid_t
start_qemu_nbd (const char *out, const char *sock, const char *uri,
                unsigned connections)
{
  char shared[32], socket_arg[PATH_MAX + 16];
  char *argv[] = { "qemu-nbd", "--persistent", shared, "--format=qcow2",
                   "--cache=writeback", socket_arg, (char *) out, NULL };
  const struct timespec tick = { 0, 10 * 1000000L };
  pid_t pid;
  int ms;

  snprintf (shared, sizeof shared, "--shared=%u", connections);
  snprintf (socket_arg, sizeof socket_arg, "--socket=%s", sock);
  pid = spawn (argv);
  if (pid == -1)
    return -1;
  for (ms = 0; ms < SERVER_START_MS; ms += 10) {
    if (serving (uri))
      return pid;
    if (waitpid (pid, NULL, WNOHANG) == pid) {
      nbdcow_error ("qemu-nbd exited before serving %s", out);
      return -1;
    }
    nanosleep (&tick, NULL);
  }
  nbdcow_error ("qemu-nbd did not serve %s within %d s", out,
                SERVER_START_MS / 1000);
  kill (pid, SIGKILL);
  waitpid (pid, NULL, 0);
  return -1;
}

/* Stops qemu-nbd, which then closes the qcow2 file cleanly. */
static int
stop_qemu_nbd (pid_t pid)
{
  int status;

  kill (pid, SIGTERM);
  while (waitpid (pid, &status, 0) == -1)
    if (errno != EINTR)
      return -1;
  return 0;
}

/* The base as qemu will find it: a relative backing file name is
 * relative to the directory of the qcow2 file.
 */
static int
check_base (const struct overlay *ov, const char *base, const char *out)
{
  char *copy = strdup (out), *path = NULL;
  struct stat st;
  int r = -1;

  if (copy == NULL ||
      asprintf (&path, "%s/%s", base[0] == '/' ? "" : dirname (copy), base)
      == -1) {
    nbdcow_error ("malloc: %m");
    path = NULL;
  }
  else if (stat (path, &st) == -1)
    nbdcow_error ("--base=%s: %s: %m", base, path);
  else if ((uint64_t) st.st_size != ov->kf.header.layout.base_size)
    nbdcow_error ("--base=%s: %" PRIu64 " bytes, but the base of %s has %"
                  PRIu64, base, (uint64_t) st.st_size, ov->kf.path,
                  ov->kf.header.layout.base_size);
  else
    r = 0;
  free (copy);
  free (path);
  return r;
}

/* A new qcow2 file out over the raw file base, clusters of the
 * overlay's block size where qcow2 allows it.
 */
static int
create_qcow2 (const struct overlay *ov, const char *base, const char *out)
{
  const struct kept_layout *l = &ov->kf.header.layout;
  uint32_t cluster = l->block_size;
  char options[64], size[32];
  char *argv[] = { "qemu-img", "create", "-q", "-f", "qcow2", "-o", options,
                   "-b", (char *) base, "-F", "raw", (char *) out, size,
                   NULL };

  if (cluster > 2 * 1024 * 1024)
    cluster = 2 * 1024 * 1024;
  snprintf (options, sizeof options, "cluster_size=%" PRIu32, cluster);
  snprintf (size, sizeof size, "%" PRIu64, l->base_size);
  return run (argv);
}

/* Creates out and writes the overlay into it through qemu-nbd serving
 * it on a socket in the directory dir.
 */
static int
export_to (struct overlay *ov, const char *base, const char *out,
           const char *dir, unsigned connections, bool progress,
           struct copy_totals *totals)
{
  char sock[PATH_MAX], uri[PATH_MAX + 32];
  pid_t server;
  int r;

  if (snprintf (sock, sizeof sock, "%s/sock", dir) >= (int) sizeof sock ||
      snprintf (uri, sizeof uri, "nbd+unix:///?socket=%s", sock)
      >= (int) sizeof uri) {
    nbdcow_error ("%s: path too long", dir);
    return -1;
  }
  if (create_qcow2 (ov, base, out) == -1)
    return -1;
  server = start_qemu_nbd (out, sock, uri, connections);
  if (server == -1)
    return -1;
  r = commit_into (ov, uri, connections, progress, "export", totals);
  if (stop_qemu_nbd (server) == -1)
    r = -1;
  unlink (sock);
  return r;
}

int
cmd_export (int argc, char **argv)
{
  enum { OPT_BASE = 256, OPT_CONNECTIONS, OPT_PROGRESS };
  const struct option options[] = {
    { "base", required_argument, NULL, OPT_BASE },
    { "connections", required_argument, NULL, OPT_CONNECTIONS },
    { "progress", no_argument, NULL, OPT_PROGRESS },
    { NULL, 0, NULL, 0 },
  };
  unsigned connections = DEFAULT_CONNECTIONS;
  const char *base = NULL, *tmpdir = getenv ("TMPDIR"), *out;
  bool progress = false;
  struct copy_totals totals;
  struct overlay ov;
  char dir[PATH_MAX];
  int c, r;

  optind = 1;
  while ((c = getopt_long (argc, argv, "", options, NULL)) != -1) {
    if (c == OPT_BASE)
      base = optarg;
    else if (c == OPT_CONNECTIONS &&
             parse_connections (optarg, &connections) == -1)
      return EXIT_ERROR;
    else if (c == OPT_PROGRESS)
      progress = true;
    else if (c == '?')
      return EXIT_ERROR;
  }
  if (argc - optind != 2 || base == NULL) {
    nbdcow_error ("export: expected FILE, --base=BASE and OUT (nbdcow export "
                  "[--connections=N] [--progress] FILE --base=BASE OUT)");
    return EXIT_ERROR;
  }
  out = argv[optind + 1];
  r = overlay_open (&ov, argv[optind], KEPTFILE_READ);
  if (r != EXIT_OK)
    return r;
  if (check_base (&ov, base, out) == -1) {
    overlay_close (&ov);
    return EXIT_ERROR;
  }
  snprintf (dir, sizeof dir, "%s/nbdcow-XXXXXX", tmpdir ? tmpdir : "/tmp");
  if (mkdtemp (dir) == NULL) {
    nbdcow_error ("%s: mkdtemp: %m", dir);
    overlay_close (&ov);
    return EXIT_ERROR;
  }
  if (export_to (&ov, base, out, dir, connections, progress, &totals) == -1) {
    unlink (out);               /* no half-made file is left behind */
    r = EXIT_ERROR;
  }
  else
    printf ("%s: exported %" PRIu64 " bytes of data and %" PRIu64
            " bytes of zeros to %s, over %s\n", argv[optind],
            totals.data_bytes, totals.zero_bytes, out, base);
  rmdir (dir);
  overlay_close (&ov);
  return r;
}
