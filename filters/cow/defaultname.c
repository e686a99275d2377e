/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Which overlay is the default export's (defaultname.h). */

#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>

#include <nbdkit-filter.h>

#include "defaultname.h"
#include "keptname.h"
#include "notice.h"

/* Where PATH records the name the plugin gives the default export. */
#define XATTR "user.nbdkit-cow.default-export"
#define NAME_MAX_BYTES 4096             /* NBD's longest export name */

static char *cow_file;          /* cow-file=PATH, or NULL */
static char *name;              /* the default export's name, once known */
static bool learned;            /* a client of this server asked for "" */
static bool overlay_named;      /* its overlay is named name, not "" */

/* Whether the kept file of export n exists. */
static bool
kept_file_exists (const char *n)
{
  char *path = kept_file_name (cow_file, n);
  struct stat st;
  bool exists = path && stat (path, &st) == 0 && S_ISREG (st.st_mode);

  free (path);
  return exists;
}

int
defaultname_load (const char *path)
{
  char buf[NAME_MAX_BYTES + 1];
  ssize_t n;

  if (path == NULL)
    return 0;
  cow_file = strdup (path);
  if (cow_file == NULL) {
    nbdkit_error ("cow: strdup: %m");
    return -1;
  }
  n = getxattr (cow_file, XATTR, buf, NAME_MAX_BYTES);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  name = strdup (buf);
  if (name == NULL) {
    nbdkit_error ("cow: strdup: %m");
    return -1;
  }
  overlay_named = kept_file_exists (name);
  return 0;
}

const char *
defaultname_overlay (void)
{
  return overlay_named ? name : "";
}

bool
defaultname_is (const char *n)
{
  return strcmp (n, defaultname_overlay ()) == 0;
}

const char *
defaultname_overlay_of (const char *exportname)
{
  if (name && strcmp (exportname, name) == 0)
    return defaultname_overlay ();
  return exportname;
}

/* Records name on PATH, saying why not where it cannot. */
static void
record (void)
{
  char current[NAME_MAX_BYTES + 1];
  ssize_t n = getxattr (cow_file, XATTR, current, NAME_MAX_BYTES);

  if (n >= 0 && (size_t) n == strlen (name) && memcmp (current, name, n) == 0)
    return;
  if (setxattr (cow_file, XATTR, name, strlen (name), 0) == -1)
    notice ("cow-file=%s: cannot record that the default export is \"%s\" "
            "(%m): after a restart, a client opening \"%s\" before any "
            "asks for the default export gets a file of its own",
            cow_file, name, name);
}

void
defaultname_learn (const char *n, bool alive)
{
  char *copy;

  if (learned)
    return;
  learned = true;
  if (name && strcmp (name, n) == 0) {
    if (cow_file)
      record ();
    return;
  }
  copy = strdup (n);
  if (copy == NULL) {
    nbdkit_error ("cow: strdup: %m");
    return;
  }
  free (name);
  name = copy;
  overlay_named = n[0] != '\0' &&
                  (alive || (cow_file && kept_file_exists (n)));
  if (overlay_named)
    notice ("cow: the default export is \"%s\", which a client opened by "
            "that name before any asked for the default export: its "
            "overlay%s serves both", n, cow_file ? " and kept file" : "");
  if (cow_file)
    record ();
}

void
defaultname_free (void)
{
  free (cow_file);
  free (name);
  cow_file = name = NULL;
  learned = overlay_named = false;
}
