/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The export a changes view reads (changesname.h). */

#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "changesname.h"

int
changes_view_name (const char *name, char separator, char **export,
                   const char **checkpoint)
{
  const char *split = separator ? strrchr (name, separator) : NULL;

  if (split == NULL)
    return 0;
  *export = strndup (name, split - name);
  if (*export == NULL)
    return -1;
  *checkpoint = split + 1;
  return 1;
}

bool
changes_separator_forgotten (const char *name, char separator,
                             char clone_separator)
{
  return separator == '\0' && clone_separator != CHANGES_RECIPE_SEPARATOR &&
         strchr (name, CHANGES_RECIPE_SEPARATOR);
}
