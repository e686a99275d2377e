/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The directory holding a file, and making a new name in it durable:
 * a file created (or renamed) survives a crash under its name only once
 * its directory is synced too.
 */

#ifndef COMMON_DIRPATH_H
#define COMMON_DIRPATH_H

/* The directory of path as dirname(3) gives it ("." for a bare name),
 * malloc'd, or NULL with errno set.
 */
extern char *dir_of (const char *path);

/* fsync of the directory dir, or of the directory holding path.
 * Return 0, or -1 with errno set.
 */
extern int sync_dir (const char *dir);
extern int sync_dir_of (const char *path);

/* The name of the file that writing through path reaches: path with
 * every symbolic link it names followed, even a last one that dangles
 * (a file created through it gets that name), malloc'd.  Path itself if
 * it is no link or cannot be looked at.  NULL with errno set: ELOOP
 * after MAX_LINKS links, as the kernel gives up.
 */
extern char *through_links (const char *path);

/* The name of path from directory dir, if path lies in dir or below
 * it, each with its symbolic links followed ("b2.qcow2" for
 * "/srv/backups/b2.qcow2" from "/srv/backups/"), malloc'd.  NULL with
 * errno set: EXDEV if path lies elsewhere, or as realpath(3) fails for
 * either.
 */
extern char *path_below (const char *dir, const char *path);

#endif /* COMMON_DIRPATH_H */
