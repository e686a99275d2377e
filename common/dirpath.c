/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
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
sync_dir_of (const char *path)
{
  char *dir = dir_of (path);
  int fd, r, saved;

  if (dir == NULL)
    return -1;
  fd = open (dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  free (dir);
  if (fd == -1)
    return -1;
  r = fsync (fd);
  saved = errno;
  close (fd);
  errno = saved;
  return r;
}
