/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The plugin contexts an export's connections share (basepool.h). */

#include <config.h>

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "basepool.h"
#include "checks.h"
#include "lockranks.h"

struct base_slot {
  nbdkit_next *next;            /* NULL until opened */
  mutex_t call_lock;            /* see baseio.h */
};

struct base_pool {
  unsigned n;                   /* set once: the slots */

  /* Under open_lock: next of every slot, and turn; held while a
   * context is opened, which only connections being set up wait for.
   */
  mutex_t open_lock;
  /* the slot of the next connection */
  unsigned turn FIELD_GUARDED_BY (open_lock);
  struct base_slot slots[];
};

/* nbdkit keeps the strings that the filters and plugin below intern
 * while it runs a call into a context no connection owns (a shared
 * context's open, prepare, close and description) in one list, which
 * it does not lock (add_intern in nbdkit's server/public.c).  Two such
 * calls at once could corrupt that list, so these calls are made one
 * at a time, under this lock, and only in this file.  It is a leaf: it
 * is taken holding an export's open_lock or a context's call lock, and
 * nothing is taken inside it.
 */
static mutex_t interns_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether the thread model lets calls into one context overlap. */
static bool parallel_calls;

void
basepool_set_thread_model (int thread_model)
{
  parallel_calls = thread_model >= NBDKIT_THREAD_MODEL_PARALLEL;
  held_rank (&interns_lock, LOCK_RANK_INTERNS);
}

struct base_pool *
basepool_new (unsigned n)
{
  struct base_pool *pool = calloc (1, sizeof *pool + n * sizeof pool->slots[0]);
  unsigned i;

  if (pool == NULL)
    return NULL;
  held_init (&pool->open_lock, LOCK_RANK_OPEN);
  pool->n = n;
  for (i = 0; i < n; ++i)
    held_init (&pool->slots[i].call_lock, LOCK_RANK_CALL);
  return pool;
}

/* Asks next everything nbdkit caches, so that later connections only
 * read it.  Returns 0, or -1 after nbdkit_error.
 */
static int
ask_cached (nbdkit_next *next)
{
  uint32_t minimum, preferred, maximum;

  if (next->get_size (next) == -1 ||
      next->block_size (next, &minimum, &preferred, &maximum) == -1 ||
      next->can_write (next) == -1 || next->can_flush (next) == -1 ||
      next->is_rotational (next) == -1 || next->can_trim (next) == -1 ||
      next->can_zero (next) == -1 || next->can_fast_zero (next) == -1 ||
      next->can_extents (next) == -1 || next->can_fua (next) == -1 ||
      next->can_multi_conn (next) == -1 || next->can_cache (next) == -1)
    return -1;
  return 0;
}

/* basepool_close, holding interns_lock. */
static void
close_interning (nbdkit_next *next)
  REQUIRES (interns_lock)
{
  next->finalize (next);
  nbdkit_next_context_close (next);
}

/* basepool_open, holding interns_lock. */
static nbdkit_next *
open_interning (nbdkit_backend *backend, const char *exportname)
  REQUIRES (interns_lock)
{
  nbdkit_next *next = nbdkit_next_context_open (backend, 1, exportname, 1);

  if (next == NULL)
    return NULL;
  if (next->prepare (next) == -1) {
    nbdkit_next_context_close (next);
    return NULL;
  }
  if (ask_cached (next) == -1) {
    close_interning (next);
    return NULL;
  }
  return next;
}

nbdkit_next *
basepool_open (nbdkit_backend *backend, const char *exportname)
{
  nbdkit_next *next;

  held_lock (&interns_lock);
  next = open_interning (backend, exportname);
  held_unlock (&interns_lock);
  return next;
}

void
basepool_close (nbdkit_next *next)
{
  held_lock (&interns_lock);
  close_interning (next);
  held_unlock (&interns_lock);
}

const char *
basepool_export_description (nbdkit_next *next)
{
  const char *description;

  held_lock (&interns_lock);
  description = next->export_description (next);
  held_unlock (&interns_lock);
  return description;
}

/* The slot whose turn it is, or with backend NULL (nothing may be
 * opened) the first from it that has a context, if any.
 */
static struct base_slot *
slot_in_turn (struct base_pool *pool, nbdkit_backend *backend)
  REQUIRES (pool->open_lock)
{
  unsigned i;

  if (backend)
    return &pool->slots[pool->turn];
  for (i = 0; i < pool->n; ++i) {
    unsigned at = (pool->turn + i) % pool->n;

    if (pool->slots[at].next) {
      pool->turn = at;
      break;
    }
  }
  return &pool->slots[pool->turn];
}

struct base_use
basepool_take (struct base_pool *pool, nbdkit_backend *backend,
               const char *exportname, nbdkit_next *opened)
{
  struct base_use use = { .next = NULL };
  struct base_slot *slot;

  held_lock (&pool->open_lock);
  slot = slot_in_turn (pool, backend);
  if (slot->next == NULL && opened) {
    slot->next = opened;
    opened = NULL;
  }
  else if (slot->next == NULL && backend &&
           (slot->next = basepool_open (backend, exportname)) != NULL)
    use.opened = 1;
  use.next = slot->next;
  if (use.next)
    pool->turn = (pool->turn + 1) % pool->n;
  held_unlock (&pool->open_lock);
  if (opened)
    basepool_close (opened);
  use.call_lock = parallel_calls ? NULL : &slot->call_lock;
  return use;
}

bool
basepool_offer (struct base_pool *pool, nbdkit_next *opened)
{
  unsigned i;

  held_lock (&pool->open_lock);
  for (i = 0; i < pool->n && opened; ++i)
    if (pool->slots[i].next == NULL) {
      pool->slots[i].next = opened;
      opened = NULL;
    }
  held_unlock (&pool->open_lock);
  if (opened == NULL)
    return true;
  basepool_close (opened);
  return false;
}

bool
basepool_has_open (struct base_pool *pool)
{
  bool open = false;
  unsigned i;

  held_lock (&pool->open_lock);
  for (i = 0; i < pool->n; ++i)
    open |= pool->slots[i].next != NULL;
  held_unlock (&pool->open_lock);
  return open;
}

void
basepool_free (struct base_pool *pool)
{
  unsigned i;

  if (pool == NULL)
    return;
  for (i = 0; i < pool->n; ++i) {
    struct base_slot *slot = &pool->slots[i];

    if (slot->next)
      basepool_close (slot->next);
    held_destroy (&slot->call_lock);
  }
  held_destroy (&pool->open_lock);
  free (pool);
}
