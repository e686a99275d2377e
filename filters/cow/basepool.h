/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The plugin contexts an export's connections share under
 * cow-base-handles=N: N contexts of the plugin, each opened read-only
 * the first time a connection needs it and kept until nbdkit cleans
 * up, instead of one per client connection.  Connections take them in
 * turn.  The background fill (fill.h) reads through them too, or,
 * without cow-base-handles, through a pool of one context its own.  A
 * context is opened shared (nbdkit_next_context_open), outside any one
 * client's connection, so the plugin sees the facts of no
 * client: TLS only if nbdkit requires it, and, before nbdkit 1.44, no
 * export name (the man page says when sharing is unsafe).
 *
 * The first open asks the context everything nbdkit then keeps (size,
 * block sizes, the can_* answers), so that connections only read what
 * nbdkit cached.  Where the thread model serializes requests, calls
 * into one context are serialized by its call lock (baseio.h), and
 * only those: a connection's overlay hits never wait for the plugin.
 */

#ifndef COW_BASEPOOL_H
#define COW_BASEPOOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <nbdkit-filter.h>

#include "tsa.h"

struct base_pool;

/* .get_ready: whether calls into one context must be serialized, from
 * the final thread model.
 */
extern void basepool_set_thread_model (int thread_model);

/* A pool of n contexts, none open yet, or NULL with errno set. */
extern struct base_pool *basepool_new (unsigned n);

/* A context of exportname opened shared and read-only, prepared and
 * asked what nbdkit caches, or NULL after nbdkit_error.
 */
extern nbdkit_next *basepool_open (nbdkit_backend *backend,
                                   const char *exportname);

/* Finalizes and closes a context of basepool_open. */
extern void basepool_close (nbdkit_next *next);

/* The description of a context of basepool_open (NULL for none).
 * Where calls into the context are serialized, the caller holds its
 * call lock.
 */
extern const char *basepool_export_description (nbdkit_next *next);

/* What a connection reads the plugin through: a context of the pool,
 * the lock its calls must hold (NULL if they may overlap), and how
 * many contexts were opened to give it (0 or 1).
 */
struct base_use {
  nbdkit_next *next;            /* NULL after nbdkit_error */
  mutex_t *call_lock;
  unsigned opened;
};

/* The context the next connection of the export exportname uses, the
 * next slot's in turn.  A slot with no context yet takes opened (a
 * context of basepool_open the caller made, or NULL), or opens one;
 * an opened that is not taken is closed.  If no context could be
 * opened, next is NULL: a later connection tries again.  With backend
 * NULL nothing is opened: the next slot in turn that has a context
 * gives it, and if none has, next is NULL with no error.
 */
extern struct base_use basepool_take (struct base_pool *pool,
                                      nbdkit_backend *backend,
                                      const char *exportname,
                                      nbdkit_next *opened);

/* Gives opened, a context of basepool_open, to a slot of pool that has
 * none.  Returns whether one took it; if none did, it is closed.
 */
extern bool basepool_offer (struct base_pool *pool, nbdkit_next *opened);

/* Whether a slot of pool has a context. */
extern bool basepool_has_open (struct base_pool *pool);

/* Finalizes and closes every open context and frees pool: when its
 * overlay ends (cow-lifetime=clients), or in .cleanup, while the
 * backend lives, after the last connection.
 */
extern void basepool_free (struct base_pool *pool);

#endif /* COW_BASEPOOL_H */
