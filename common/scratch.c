/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

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

/* Each thread's cached buffer.  The key exists only for its destructor,
 * which frees the buffer when the thread exits.
 */
static _Thread_local struct scratch cached;
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void
free_cached (void *arg)
{
  struct scratch *s = arg;

  free (s->buf);
  s->buf = NULL;
  s->size = 0;
}

static void
make_exit_key (void)
{
  pthread_key_create (&exit_key, free_cached);
}

void *
scratch_get (size_t size)
{
  void *buf;

  if (size > SCRATCH_KEEP || cached.in_use)
    return malloc (size);
  if (cached.size < size) {
    pthread_once (&exit_key_once, make_exit_key);
    buf = realloc (cached.buf, size);
    if (buf == NULL)
      return NULL;
    if (cached.buf == NULL)
      pthread_setspecific (exit_key, &cached);
    cached.buf = buf;
    cached.size = size;
  }
  cached.in_use = true;
  return cached.buf;
}

void
scratch_put (void *buf)
{
  if (buf != NULL && buf == cached.buf)
    cached.in_use = false;
  else
    free (buf);
}
