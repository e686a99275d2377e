/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The plugin's export a clone reads (clonename.h). */

#include <config.h>

#include <string.h>

#include "clonename.h"

char *
clone_base_name (const char *name, char separator)
{
  const char *tag = separator ? strrchr (name, separator) : NULL;

  if (tag == NULL)
    return strdup (name);
  return strndup (name, tag - name);
}
