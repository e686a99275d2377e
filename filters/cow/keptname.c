/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The file of an export's kept overlay (keptname.h). */

#include <config.h>

#include <inttypes.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "keptname.h"

static uint64_t
fnv1a (const char *name)
{
  uint64_t hash = UINT64_C (14695981039346656037);
  size_t i;

  for (i = 0; name[i]; ++i)
    hash = (hash ^ (unsigned char) name[i]) * UINT64_C (1099511628211);
  return hash;
}

char *
kept_file_name (const char *cow_file, const char *name)
{
  const char *base = strrchr (cow_file, '/') + 1;
  size_t len = strlen (cow_file), i;
  char *path, *p;

  if (name[0] == '\0')
    return strdup (cow_file);
  path = malloc (len + 20 + 3 * strlen (name));   /* 20: ".#" and a hash */
  if (path == NULL)
    return NULL;
  p = path + sprintf (path, "%s.", cow_file);
  for (i = 0; name[i]; ++i) {
    unsigned char c = name[i];
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
        (c >= '0' && c <= '9') || c == '_' || c == '-')
      *p++ = c;
    else
      p += sprintf (p, "%%%02X", c);
  }
  *p = '\0';
  if (strlen (base) + (p - (path + len)) > NAME_MAX)
    sprintf (path + len, ".#%016" PRIx64, fnv1a (name));
  return path;
}

bool
kept_file_names_fit (const char *cow_file)
{
  const char *base = strrchr (cow_file, '/') + 1;

  return strlen (base) <= NAME_MAX - KEPT_NAME_SUFFIX &&
         (size_t) (base - cow_file) + NAME_MAX < PATH_MAX;
}
