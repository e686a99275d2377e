/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* Whether nbdkit requires TLS (servertls.h). */

#include <config.h>

#include <stdio.h>
#include <string.h>

#include "servertls.h"

/* Whether arg, an option of nbdkit's, takes the next argument as its
 * value (nbdkit 1.32 to 1.44): a long one without "=", or a cluster of
 * short ones ending in one that takes a value.
 */
static bool
takes_next (const char *arg)
{
  static const char *const long_with_value[] = {
    "debug", "export", "export-name", "exportname", "filter", "group",
    "ip-addr", "ipaddr", "log", "mask-handshake", "pid-file", "pidfile",
    "port", "run", "selinux-label", "threads", "timeout", "time-out",
    "tls", "tls-certificates", "tls-psk", "unix", "user",
  };
  const char *p;
  size_t i;

  if (arg[1] == '-') {
    for (i = 0; i < sizeof long_with_value / sizeof long_with_value[0]; ++i)
      if (strcmp (arg + 2, long_with_value[i]) == 0)
        return true;
    return false;
  }
  for (p = arg + 1; *p; ++p)
    if (strchr ("DegipPtuU", *p))
      return p[1] == '\0';
  return false;
}

/* The first of args[0..n) after nbdkit's own name: after the first
 * whose last component is "nbdkit" (a program may run nbdkit, as the
 * dynamic loader's --preload or valgrind do), or else after the first.
 */
static const char *
options_start (const char *args, const char *end)
{
  const char *arg, *base;

  for (arg = args; arg < end; arg += strlen (arg) + 1) {
    base = strrchr (arg, '/');
    if (strcmp (base ? base + 1 : arg, "nbdkit") == 0)
      return arg + strlen (arg) + 1;
  }
  return args + strlen (args) + 1;
}

bool
servertls_required_in (const char *args, size_t n)
{
  const char *end = args + n, *arg, *mode = NULL;

  if (n == 0 || args[n - 1] != '\0')
    return false;
  /* Past nbdkit's own name, up to the plugin's. */
  for (arg = options_start (args, end); arg < end;
       arg += strlen (arg) + 1) {
    const char *value = arg + strlen (arg) + 1;

    if (strcmp (arg, "--") == 0 || arg[0] != '-')
      break;
    if (strncmp (arg, "--tls=", 6) == 0)
      mode = arg + 6;
    else if (takes_next (arg) && value < end) {
      if (strcmp (arg, "--tls") == 0)
        mode = value;
      arg = value;
    }
  }
  return mode != NULL && strcmp (mode, "require") == 0;
}

bool
servertls_required (void)
{
  char args[65536];
  FILE *fp = fopen ("/proc/self/cmdline", "r");
  size_t n;

  if (fp == NULL)
    return false;
  n = fread (args, 1, sizeof args, fp);
  fclose (fp);
  return servertls_required_in (args, n);
}
