/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* What every overlay of the server shares (server.h). */

#include <config.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nbdkit-filter.h>

#include "kept.h"
#include "keptname.h"
#include "params.h"
#include "server.h"
#include "space.h"
#include "storeio.h"
#include "stripes.h"
#include "tempfiles.h"

/* The disk space of every overlay, counted against cow-max-size. */
static struct space space;

/* The files of the throw-away overlays; NULL with cow-file. */
static struct temp_files *temp_files;

/* The plugin's opens by every overlay so far; atomic. */
static uint64_t plugin_opens;

int
server_init (void)
{
  const char *tmpdir = getenv ("TMPDIR");
  unsigned block_shift = __builtin_ctz (params.block_size);

  space_init (&space, params.max_size);
  if (params.cow_file)
    return 0;
  temp_files = temp_files_new (tmpdir ? tmpdir : "/var/tmp", params.stripes,
                               stripes_chunk_shift (block_shift));
  return temp_files ? 0 : -1;
}

struct blk *
server_new_blk (const char *exportname)
{
  struct blk *blk;
  char *path;

  if (params.cow_file == NULL)
    return blk_new (params.block_size, params.stripes, temp_files, &space);
  path = kept_file_name (params.cow_file, exportname);
  if (path == NULL) {
    nbdkit_error ("cow: %m");
    return NULL;
  }
  blk = blk_new_kept (params.block_size, params.stripes, path, exportname,
                      &space);
  free (path);
  return blk;
}

/* The regular file path (relative to the directory dir_fd), opened to
 * read, or -1: a FIFO or a device there is not opened to wait for a
 * writer, only refused.
 */
static int
open_regular (int dir_fd, const char *path)
{
  struct stat st;
  int fd = openat (dir_fd, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);

  if (fd == -1)
    return -1;
  if (fstat (fd, &st) == -1 || !S_ISREG (st.st_mode)) {
    close (fd);
    return -1;
  }
  return fd;
}

/* cow-file's file for the overlay name, opened to read, or -1 if
 * there is none, it is not a regular file or it cannot be opened.
 */
static int
open_kept_file (const char *name)
{
  char *path;
  int fd;

  if (params.cow_file == NULL)
    return -1;
  path = kept_file_name (params.cow_file, name);
  fd = path ? open_regular (AT_FDCWD, path) : -1;
  free (path);
  return fd;
}

bool
server_kept_exists (const char *name)
{
  int fd = open_kept_file (name);

  if (fd == -1)
    return false;
  close (fd);
  return true;
}

/* Reads the header of the kept file fd into *header and closes fd.
 * Returns whether the header is sound; false if fd is -1.
 */
static bool
read_sound_header (int fd, struct kept_header *header)
{
  uint8_t buf[KEPT_HEADER_SIZE];
  const char *why;
  bool read_whole;

  if (fd == -1)
    return false;
  read_whole = pread (fd, buf, sizeof buf, 0) == (ssize_t) sizeof buf;
  close (fd);
  return read_whole && kept_header_decode (buf, header, &why) == KEPT_SOUND;
}

bool
server_kept_is_whole (const char *name)
{
  struct kept_header header;

  return read_sound_header (open_kept_file (name), &header) &&
         header.facts.known && strcmp (header.name, name) == 0;
}

/* Whether the file name in dir, a file beside cow-file's, is the file
 * of the named export *header names, reading its header into *header.
 */
static bool
is_named_kept_file (DIR *dir, const char *file_name,
                    struct kept_header *header)
{
  char *path;
  bool is_named;

  if (!read_sound_header (open_regular (dirfd (dir), file_name), header) ||
      header->name[0] == '\0')
    return false;
  path = kept_file_name (params.cow_file, header->name);
  is_named = path && strcmp (strrchr (path, '/') + 1, file_name) == 0;
  free (path);
  return is_named;
}

void
server_kept_each_named (void (*take) (const char *name))
{
  const char *slash = strrchr (params.cow_file, '/');
  size_t prefix_len = strlen (slash + 1);
  char *dir_path = slash == params.cow_file ? strdup ("/")
    : strndup (params.cow_file, slash - params.cow_file);
  DIR *dir = dir_path ? opendir (dir_path) : NULL;
  struct kept_header header;
  struct dirent *d;

  if (dir == NULL) {
    nbdkit_debug ("cow-file: the directory of %s cannot be listed: %m",
                  params.cow_file);
    free (dir_path);
    return;
  }
  while ((d = readdir (dir)) != NULL)
    if (strncmp (d->d_name, slash + 1, prefix_len) == 0 &&
        d->d_name[prefix_len] == '.' &&
        is_named_kept_file (dir, d->d_name, &header))
      take (header.name);
  closedir (dir);
  free (dir_path);
}

void
server_exiting (void)
{
  if (temp_files)
    temp_files_exiting (temp_files);
}

uint64_t
server_space_left (void)
{
  uint64_t limit = space_limit (&space), used = space_used (&space);

  if (limit == UINT64_MAX)
    return UINT64_MAX;
  return used < limit ? limit - used : 0;
}

void
server_space_charge (uint64_t bytes)
{
  space_charge (&space, bytes);
}

void
server_space_give (uint64_t bytes)
{
  space_give (&space, bytes);
}

void
server_count_plugin_opens (unsigned n)
{
  __atomic_fetch_add (&plugin_opens, n, __ATOMIC_RELAXED);
}

void
server_get_stats (struct server_stats *stats)
{
  stats->throwaway_files = temp_files ? temp_files_count (temp_files) : 0;
  stats->throwaway_bytes = temp_files ? temp_files_bytes (temp_files) : 0;
  stats->plugin_opens = __atomic_load_n (&plugin_opens, __ATOMIC_RELAXED);
  stats->space_limit = space_limit (&space);
  stats->space_used = space_used (&space);
  stats->space_refusals = space_refusals (&space);
  stats->filesystem_refusals = storeio_room_refusals ();
}

void
server_free (void)
{
  temp_files_free (temp_files);
  temp_files = NULL;
}
