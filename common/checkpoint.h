/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A checkpoint: a named point in an overlay's history, which the
 * filter keeps in memory (filters/cow/changes.h) and a kept overlay
 * of format version 4 in its file (kept/kept.h).  Its epoch is a
 * number never taken before in the overlay; a block changed since the
 * checkpoint carries a mark of at least that epoch.
 */

#ifndef COMMON_CHECKPOINT_H
#define COMMON_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* The most checkpoints an overlay has at once, and the longest name. */
#define CHECKPOINTS_MAX 32
#define CHECKPOINT_NAME_MAX 64

struct checkpoint {
  char name[CHECKPOINT_NAME_MAX + 1];
  uint32_t epoch;
};

/* Whether name can name a checkpoint: 1 to CHECKPOINT_NAME_MAX
 * letters, digits, '_', '-' and '.', not starting with '-' or '.'.
 */
static inline bool
checkpoint_name_valid (const char *name)
{
  size_t len = strlen (name), i;

  if (len == 0 || len > CHECKPOINT_NAME_MAX || name[0] == '-' ||
      name[0] == '.')
    return false;
  for (i = 0; i < len; ++i) {
    char c = name[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
          (c >= 'A' && c <= 'Z') || c == '_' || c == '-' || c == '.'))
      return false;
  }
  return true;
}

#endif /* COMMON_CHECKPOINT_H */
