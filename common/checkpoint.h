/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A checkpoint: a named point in an overlay's history, which the
 * filter keeps in memory (filters/cow/changes.h) and a kept overlay
 * of format version 4 in its file (kept/kept.h).  Its epoch is a
 * number never taken before in the overlay; a block changed since the
 * checkpoint carries a mark of at least that epoch.  Its id, a random
 * number taken when it is made, tells it from every other checkpoint
 * of any overlay, server or run: what a backup made at it records.
 */

#ifndef COMMON_CHECKPOINT_H
#define COMMON_CHECKPOINT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* The most checkpoints an overlay has at once, and the longest name. */
#define CHECKPOINTS_MAX 32
#define CHECKPOINT_NAME_MAX 64

struct checkpoint {
  char name[CHECKPOINT_NAME_MAX + 1];
  uint32_t epoch;
  uint64_t id;                  /* never 0 */
  /* Made with a point-in-time view not deleted since: a live view, or,
   * read from a file after a restart, one that ended with the server.
   */
  bool view;
};

/* A new checkpoint id: random, never 0. */
static inline uint64_t
checkpoint_new_id (void)
{
  uint64_t id = 0;
  struct timespec now;

  if (getrandom (&id, sizeof id, GRND_NONBLOCK) != sizeof id) {
    clock_gettime (CLOCK_REALTIME, &now);
    id = (uint64_t) now.tv_sec * 1000000000 + now.tv_nsec;
    id ^= (uint64_t) getpid () << 40;
  }
  return id ? id : 1;
}

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
