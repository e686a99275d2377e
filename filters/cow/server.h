/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* What every overlay of the server shares: the space cap
 * (cow-max-size), and the temporary files the throw-away overlays keep
 * their data in; the block layer of a new overlay, made over them; and
 * the kept files (cow-file) a run before left.
 */

#ifndef COW_SERVER_H
#define COW_SERVER_H

#include "blk.h"
#include "statsrecords.h"

/* .get_ready: the space cap and, without cow-file, the files in
 * $TMPDIR.  Returns 0, or -1 after nbdkit_error.
 */
extern int server_init (void);

/* The block layer of a new overlay of exportname: throw-away, or kept
 * in cow-file's file for the name.  NULL after nbdkit_error.
 */
extern struct blk *server_new_blk (const char *exportname);

/* Whether cow-file's file for the overlay name exists (false without
 * cow-file).
 */
extern bool server_kept_exists (const char *name);

/* Whether cow-file's file for the overlay name holds, by its header,
 * every block and the plugin's facts, as a fill that completed leaves
 * it: then it can be served with no plugin.  False without cow-file,
 * or if there is no such file or it cannot be read.
 */
extern bool server_kept_is_whole (const char *name);

/* Calls take with the overlay name of every named export whose file
 * under cow-file a run before made: each file beside cow-file's whose
 * header is sound and names an export whose file it is.  Files that
 * cannot be read are passed over.
 */
extern void server_kept_each_named (void (*take) (const char *name));

/* nbdkit is exiting: the files vanish with it, so overlays ending now
 * need not give their space back to them.
 */
extern void server_exiting (void);

/* The overlay space cow-max-size still allows (UINT64_MAX without
 * it).
 */
extern uint64_t server_space_left (void);

/* Counts bytes against cow-max-size that a kept file no overlay has
 * open holds (a resting one, registry.c), even past the limit; gives
 * them back.
 */
extern void server_space_charge (uint64_t bytes);
extern void server_space_give (uint64_t bytes);

/* Counts n more opens of the plugin, by any overlay. */
extern void server_count_plugin_opens (unsigned n);

/* The files, space and plugin-open figures of *stats (stats.h). */
extern void server_get_stats (struct server_stats *stats);

extern void server_free (void);

#endif /* COW_SERVER_H */
