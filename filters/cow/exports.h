/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The exports as connections see them: a connection gets its export's
 * overlay (registry.h), and the plugin as it reads it, in one call,
 * and lets them go in another.  An overlay is one per export, so that
 * data never crosses exports and a client reconnecting to an export
 * sees its earlier writes.  A kept overlay a run before made starts
 * from its file, and stands alone if it holds every block.
 */

#ifndef COW_EXPORTS_H
#define COW_EXPORTS_H

#include <stdbool.h>

#include <nbdkit-filter.h>

#include "registry.h"

/* What a connection reads and writes. */
struct export_conn {
  struct overlay *overlay;
  nbdkit_next *shared;          /* a context of the overlay's pool, or
                                   NULL: the connection's own */
  mutex_t *call_lock;           /* the lock calls into shared hold, or
                                   NULL (basepool.h) */
  const struct base_facts *alone;       /* the overlay's, where it
                                           stands alone; else NULL */
};

/* .get_ready: what every overlay shares (server.h) and, with cow-file,
 * the default export's kept overlay, opened, checked and locked from
 * the start.  Returns 0, or -1 after nbdkit_error naming the parameter.
 */
extern int exports_init (void);

/* Connects c to the overlay of exportname, reading the plugin's export
 * base: with share, through a context the export's connections share
 * (a name new to the server is opened in the plugin first, so that the
 * plugin can refuse it before an overlay is made); else through the
 * connection's own context, opened read-only with next, nbdkit's open,
 * before the overlay, as nbdkit's filter does.  Where the overlay
 * stands alone (registry_stand_alone), through nothing: c->alone says
 * what to answer of the plugin.  Returns 0, or -1 after
 * nbdkit_error if the name is refused or its overlay cannot be made.
 * The overlay lives at least until exports_disconnect.
 */
extern int exports_connect (struct export_conn *c, const char *exportname,
                            const char *base, bool share,
                            nbdkit_next_open *next, nbdkit_context *context);

/* Whether exportname has an overlay in this run, or a kept file a run
 * before made, or is the default export, which every server serves: 1
 * or 0, or -1 after nbdkit_error.  A view of an export that has none
 * of these cannot exist: it is refused before an overlay (and its
 * file) is made for it.
 */
extern int exports_exist (const char *exportname);

/* Counts n opens of the plugin for overlay o, and for the server. */
extern void exports_count_plugin_opens (struct overlay *o, unsigned n);

/* The connection of c has closed, served (it got past .prepare) or
 * refused (registry.h).
 */
extern void exports_disconnect (const struct export_conn *c, bool served);

/* registry_pin, but an export with no overlay yet whose kept file a
 * run before made is started from its file first (and ends as the pin
 * goes, no client having opened it).  NULL if it has neither, or after
 * nbdkit_error.
 */
extern struct overlay *exports_pin_or_start (const char *exportname);

/* Frees every overlay, flushing the kept ones.  Returns 0, or -1 if a
 * kept overlay's last flush failed.
 */
extern int exports_free (void);

#endif /* COW_EXPORTS_H */
