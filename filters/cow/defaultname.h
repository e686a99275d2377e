/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Which overlay is the default export's.  nbdkit hands .open the
 * plugin's own name for the default export "" (such as the
 * default-export of the exportname filter), and tells the filter that
 * name only when a client asks for "".  So a client may open that name
 * before anyone asks for "", and its overlay is then made under the
 * name.  The rule, the same whatever the order of connections and
 * endings, for the server's life and across restarts:
 *
 *   - the default export's overlay is named "" (kept in cow-file=PATH
 *     itself), unless, when its name N is learned, an overlay named N
 *     is alive or, with cow-file, the file PATH.N exists: then that
 *     one, named N, for both names;
 *   - once learned, N and "" reach that overlay until nbdkit exits;
 *   - with cow-file, N is recorded on PATH (the extended attribute
 *     user.nbdkit-cow.default-export), so that after a restart N is
 *     known from the start: a client opening N first reaches the same
 *     file as a client asking for "".
 *
 * Not thread-safe: its one caller, the registry (registry.h), calls it
 * under its lock, but defaultname_load and defaultname_free, called
 * alone.
 */

#ifndef COW_DEFAULTNAME_H
#define COW_DEFAULTNAME_H

#include <stdbool.h>


/* At start, with cow-file=cow_file (or NULL): the name recorded on it,
 * if any.  Returns 0, or -1 after nbdkit_error (no memory).
 */
extern int defaultname_load (const char *cow_file);

/* The name of the default export's overlay: "" until decided
 * otherwise.
 */
extern const char *defaultname_overlay (void);

/* Whether name is that of the default export's overlay. */
extern bool defaultname_is (const char *name);

/* The name of the overlay that exportname, as nbdkit hands it to
 * .open, reaches: the default export's for the default export's name,
 * once known.
 */
extern const char *defaultname_overlay_of (const char *exportname);

/* A client asked for "", which the plugin names name; alive says
 * whether an overlay of that name is alive.  The first time, decides
 * the default export's overlay and records name on cow-file, saying
 * what it decided where that is not "" (a notice).
 */
extern void defaultname_learn (const char *name, bool alive);

extern void defaultname_free (void);

#endif /* COW_DEFAULTNAME_H */
