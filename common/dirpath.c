/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The directory of a file, synced; the file a name reaches (dirpath.h). */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dirpath.h"

char *
dir_of (const char *path)
{
  char *copy = strdup (path), *dir;

  if (copy == NULL)
    return NULL;
  dir = strdup (dirname (copy));
  free (copy);
  return dir;
}

int
sync_dir (const char *dir)
{
  int fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), r, saved;

  if (fd == -1)
    return -1;
  r = fsync (fd);
  saved = errno;
  close (fd);
  errno = saved;
  return r;
}

int
sync_dir_of (const char *path)
{
  char *dir = dir_of (path);
  int r = dir == NULL ? -1 : sync_dir (dir);

  free (dir);                   /* keeps errno (POSIX.1-2024, glibc 2.33) */
  return r;
}

/* As the kernel's limit on links followed in one lookup. */
#define MAX_LINKS 40

static bool
is_link (const char *path)
{
  struct stat st;

  return lstat (path, &st) == 0 && S_ISLNK (st.st_mode);
}

/* What the link path points to, relative to the link's directory if it
 * is not absolute, malloc'd, or NULL with errno set.
 */
static char *
link_target (const char *path)
{
  char target[PATH_MAX], *dir, *joined = NULL;
  ssize_t n = readlink (path, target, sizeof target);

  if (n == -1)
    return NULL;
  if (n == (ssize_t) sizeof target) {
    errno = ENAMETOOLONG;
    return NULL;
  }
  target[n] = '\0';
  if (target[0] == '/')
    return strdup (target);
  dir = dir_of (path);
  if (dir != NULL && asprintf (&joined, "%s/%s", dir, target) == -1)
    joined = NULL;
  free (dir);
  return joined;
}

char *
path_below (const char *dir, const char *path)
{
  char *real_dir = realpath (dir, NULL), *real_path = NULL, *below = NULL;
  size_t n;

  if (real_dir)
    real_path = realpath (path, NULL);
  if (real_path) {
    n = strcmp (real_dir, "/") == 0 ? 0 : strlen (real_dir);
    if (strncmp (real_path, real_dir, n) == 0 && real_path[n] == '/' &&
        real_path[n + 1] != '\0')
      below = strdup (real_path + n + 1);
    else
      errno = EXDEV;
  }
  free (real_dir);
  free (real_path);
  return below;
}

char *
through_links (const char *path)
{
  char *name = strdup (path), *next;
  unsigned links;

  for (links = 0; name != NULL && is_link (name); ++links) {
    if (links == MAX_LINKS) {
      free (name);
      errno = ELOOP;
      return NULL;
    }
    next = link_target (name);
    free (name);
    name = next;
  }
  return name;
}
