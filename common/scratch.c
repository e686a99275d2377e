/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The per-thread scratch buffers (scratch.h). */

#include <config.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "scratch.h"

struct scratch {
  void *buf;
  size_t size;
  bool in_use;
};

/* Each thread's cached buffer hangs off this key, whose destructor
 * frees it when the thread exits.
 *
 * Why not _Thread_local: in a dlopen'd filter that is dynamic TLS,
 * which glibc allocates lazily and frees in _dl_deallocate_tls, out of
 * ThreadSanitizer's sight; TSan then reports the reuse of that memory
 * by the next thread as a race (it did in CI).  A malloc'd struct
 * behind a pthread key has the same cost and is fully visible.
 */
static pthread_key_t scratch_key;
static pthread_once_t scratch_key_once = PTHREAD_ONCE_INIT;

static void
free_scratch (void *arg)
{
  struct scratch *s = arg;

  free (s->buf);
  free (s);
}

static void
make_scratch_key (void)
{
  pthread_key_create (&scratch_key, free_scratch);
}

/* This thread's cache, created on first use; NULL if out of memory. */
static struct scratch *
thread_scratch (void)
{
  struct scratch *s;

  pthread_once (&scratch_key_once, make_scratch_key);
  s = pthread_getspecific (scratch_key);
  if (s != NULL)
    return s;
  s = calloc (1, sizeof *s);
  if (s == NULL)
    return NULL;
  if (pthread_setspecific (scratch_key, s) != 0) {
    free (s);
    return NULL;
  }
  return s;
}

void *
scratch_get (size_t size)
{
  struct scratch *s;
  void *buf;

  if (size > SCRATCH_KEEP)
    return malloc (size);
  s = thread_scratch ();
  if (s == NULL || s->in_use)
    return malloc (size);
  if (s->size < size) {
    buf = realloc (s->buf, size);
    if (buf == NULL)
      return NULL;
    s->buf = buf;
    s->size = size;
  }
  s->in_use = true;
  return s->buf;
}

void
scratch_put (void *buf)
{
  struct scratch *s;

  if (buf == NULL)
    return;
  pthread_once (&scratch_key_once, make_scratch_key);
  s = pthread_getspecific (scratch_key);
  if (s != NULL && buf == s->buf)
    s->in_use = false;
  else
    free (buf);
}
