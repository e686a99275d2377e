/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* What nbdkit does not tell a filter, made up for (nbdkitgaps.h). */

#include <config.h>

#include <stdbool.h>
#include <string.h>

#include "nbdkitargs.h"
#include "nbdkitgaps.h"

/* The plugin is given dir=: it serves exports by name.  Set in
 * .config, read after.
 */
static bool plugin_dir;

/* nbdkit's command line, read in .get_ready, and what it says. */
static char args[65536];
static bool tls_required;
static const char *unix_socket;

void
nbdkitgaps_note_plugin_key (const char *key)
{
  if (strcmp (key, "dir") == 0)
    plugin_dir = true;
}

bool
nbdkitgaps_shared_reaches (const char *exportname)
{
  return SHARED_KNOWS_NAME || (!plugin_dir && exportname[0] == '\0');
}

bool
nbdkitgaps_shared_reaches_none (void)
{
  return !SHARED_KNOWS_NAME && plugin_dir;
}

void
nbdkitgaps_read_options (void)
{
  size_t len = nbdkitargs_read (args, sizeof args);

  tls_required = nbdkitargs_tls_required_in (args, len);
  unix_socket = nbdkitargs_value_in (args, len, "unix", 'U');
}

bool
nbdkitgaps_shared_sees_tls (void)
{
  return tls_required;
}

const char *
nbdkitgaps_unix_socket (void)
{
  return unix_socket;
}
