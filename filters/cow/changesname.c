/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The export a changes view or a point-in-time view reads
 * (changesname.h).
 */

#include <config.h>

#include <stdlib.h>
#include <string.h>

#include "changesname.h"

/* Splits name at its last separator, if it has one, into *head
 * (malloc'd) and *tail within name: returns 1, 0 if it has none, or -1
 * with errno set.
 */
static int
split_last (const char *name, char separator, char **head, const char **tail)
{
  const char *split = separator ? strrchr (name, separator) : NULL;

  if (split == NULL)
    return 0;
  *head = strndup (name, split - name);
  if (*head == NULL)
    return -1;
  *tail = split + 1;
  return 1;
}

int
changes_view_name (const char *name, char separator, char **export,
                   const char **checkpoint)
{
  return split_last (name, separator, export, checkpoint);
}

int
instant_view_name (const char *name, char separator, char **export,
                   const char **view)
{
  return split_last (name, separator, export, view);
}

/* Whether name holds recipe, the separator of a kind of view the
 * server has none for (separator '\0'), where recipe is not the clone
 * separator.
 */
static bool
forgotten (const char *name, char separator, char recipe,
           char clone_separator)
{
  return separator == '\0' && clone_separator != recipe &&
         strchr (name, recipe);
}

bool
changes_separator_forgotten (const char *name, char separator,
                             char clone_separator)
{
  return forgotten (name, separator, CHANGES_RECIPE_SEPARATOR,
                    clone_separator);
}

bool
view_separator_forgotten (const char *name, char separator,
                          char clone_separator)
{
  return forgotten (name, separator, VIEW_RECIPE_SEPARATOR, clone_separator);
}
