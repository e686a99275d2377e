/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The file of an export's kept overlay (cow-file=PATH): PATH for the
 * default export, PATH.NAME for export NAME, with every byte of NAME
 * but [A-Za-z0-9_-] written %XX, so that no name a client sends can
 * leave the directory of PATH or make an invalid file name.  Names too
 * long for a file name become PATH.#HASH, 16 hex digits of their
 * 64-bit FNV-1a hash; the file's header holds the full name, so two
 * names with one hash cannot share a file (the second is refused).
 */

#ifndef COW_KEPTNAME_H
#define COW_KEPTNAME_H

#include <stdbool.h>

/* The most a named export's file adds to the file name of PATH:
 * ".#" and the hash.
 */
#define KEPT_NAME_SUFFIX 18

/* The file of export name ("" the default export) under cow_file, an
 * absolute path, malloc'd; NULL with errno set.
 */
extern char *kept_file_name (const char *cow_file, const char *name);

/* Whether the file of every export name under cow_file, an absolute
 * path, can exist: its file name is at most NAME_MAX - KEPT_NAME_SUFFIX
 * bytes, and its directory leaves room for a file name of NAME_MAX
 * bytes within PATH_MAX.
 */
extern bool kept_file_names_fit (const char *cow_file);

#endif /* COW_KEPTNAME_H */
