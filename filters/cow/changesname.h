/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The export a view reads.  A changes view (cow-changes-separator=C): a name
 * E C is the changes view of export E since its overlay began, E C T
 * since checkpoint T, split at the last C, so that a checkpoint's name
 * never holds C and an export's may; "C" and "C T" are views of the
 * default export.  E may be a clone's name (clonename.h).  Any other
 * name, or any name when there is no separator, names no view.
 */

#ifndef COW_CHANGESNAME_H
#define COW_CHANGESNAME_H

#include <stdbool.h>

/* Whether name names a changes view: 1, setting *export to E
 * (malloc'd) and *checkpoint to T within name ("" for since the
 * overlay began); 0 if not; -1 with errno set.  separator '\0': none.
 */
extern int changes_view_name (const char *name, char separator,
                              char **export, const char **checkpoint);

/* The separator the man page's recipes use for changes views. */
#define CHANGES_RECIPE_SEPARATOR '+'

/* Whether name would name a changes view in the man page's recipes
 * but the server has no separator: a name holding
 * CHANGES_RECIPE_SEPARATOR, which would otherwise be served as an
 * export of its own, a fresh overlay with none of the export's
 * changes, and a copy of it silently wrong.  Not where that character
 * is the clone separator (clonename.h): such names are clones.
 */
extern bool changes_separator_forgotten (const char *name, char separator,
                                         char clone_separator);

/* A point-in-time view (cow-view-separator=C): a name E C V is view V
 * of export E, split at the last C, so that a view's name (a
 * checkpoint's) never holds C and an export's may.  E may be a
 * clone's name, and E C V C' S (C' the changes separator) the changes
 * view of view V since checkpoint S.  Whether name names one: 1,
 * setting *export to E (malloc'd) and *view to V within name (empty
 * if name ends with C: no view has that name); 0 if not; -1 with
 * errno set.  separator '\0': none.
 */
extern int instant_view_name (const char *name, char separator,
                              char **export, const char **view);

/* The separator the man page's recipes use for point-in-time views,
 * and whether name would name one there but the server has no
 * separator for them (as changes_separator_forgotten).
 */
#define VIEW_RECIPE_SEPARATOR '@'
extern bool view_separator_forgotten (const char *name, char separator,
                                      char clone_separator);

#endif /* COW_CHANGESNAME_H */
