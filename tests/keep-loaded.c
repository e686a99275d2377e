/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Preloaded into nbdkit by ./nbdkit under sanitizers and valgrind:
 * dlclose does nothing, so plugins and filters stay loaded when nbdkit
 * exits.  Otherwise memory that a plugin still holds through its static
 * variables shows as leaked once the plugin is unloaded, and real leaks
 * in unloaded code come without symbols.
 */

int
dlclose (void *handle)
{
  (void) handle;
  return 0;
}
