/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* nbdkit's own options, read from its command line (nbdkitargs.h). */

#include <config.h>

#include <stdio.h>
#include <string.h>

#include "nbdkitargs.h"

/* nbdkit's short options that take a value (nbdkit 1.32 to 1.44). */
static const char short_with_value[] = "DegipPtuU";

/* Whether name, a long option of nbdkit's given without "=", takes
 * the next argument as its value.
 */
static bool
long_takes_next (const char *name)
{
  static const char *const long_with_value[] = {
    "debug", "export", "export-name", "exportname", "filter", "group",
    "ip-addr", "ipaddr", "log", "mask-handshake", "pid-file", "pidfile",
    "port", "run", "selinux-label", "threads", "timeout", "time-out",
    "tls", "tls-certificates", "tls-psk", "unix", "user",
  };
  size_t i;

  for (i = 0; i < sizeof long_with_value / sizeof long_with_value[0]; ++i)
    if (strcmp (name, long_with_value[i]) == 0)
      return true;
  return false;
}

/* The first of args[0..n) after nbdkit's own name: after the first
 * whose last component is "nbdkit", or else after the first.
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

size_t
nbdkitargs_read (char *buf, size_t size)
{
  FILE *fp = fopen ("/proc/self/cmdline", "r");
  size_t n;

  if (fp == NULL)
    return 0;
  n = fread (buf, 1, size, fp);
  fclose (fp);
  return n;
}

const char *
nbdkitargs_value_in (const char *args, size_t n, const char *long_name,
                     char short_name)
{
  const char *end = args + n, *arg, *found = NULL;
  size_t long_len = strlen (long_name);

  if (n == 0 || args[n - 1] != '\0')
    return NULL;
  /* Past nbdkit's own name, up to the plugin's. */
  for (arg = options_start (args, end); arg < end;
       arg += strlen (arg) + 1) {
    const char *next = arg + strlen (arg) + 1;
    const char *value = next < end ? next : NULL;
    const char *p;

    if (strcmp (arg, "--") == 0 || arg[0] != '-' || arg[1] == '\0')
      break;
    if (arg[1] == '-') {
      const char *name = arg + 2;
      const char *equals = strchr (name, '=');

      if (equals) {
        if ((size_t) (equals - name) == long_len &&
            strncmp (name, long_name, long_len) == 0)
          found = equals + 1;
        continue;
      }
      if (!long_takes_next (name))
        continue;
      if (strcmp (name, long_name) == 0 && value)
        found = value;
      if (value)
        arg = value;
      continue;
    }
    /* A cluster of short options: the first that takes a value takes
     * the rest of the cluster, or else the next argument.
     */
    for (p = arg + 1; *p; ++p) {
      if (!strchr (short_with_value, *p))
        continue;
      if (p[1] != '\0')
        value = p + 1;
      else if (value)
        arg = value;
      if (*p == short_name && value)
        found = value;
      break;
    }
  }
  return found;
}

bool
nbdkitargs_tls_required_in (const char *args, size_t n)
{
  const char *mode = nbdkitargs_value_in (args, n, "tls", '\0');

  return mode != NULL && strcmp (mode, "require") == 0;
}
