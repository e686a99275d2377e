/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The sharded counters (shardctr.h). */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "divround.h"
#include "shardctr.h"

#define CACHE_LINE 64
#define CELLS_PER_LINE (CACHE_LINE / sizeof (_Atomic uint64_t))

int
shardctr_init (struct shardctr *ctr, unsigned n)
{
  unsigned lines = div_round_up (n, CELLS_PER_LINE);
  size_t size = (size_t) SHARDCTR_SHARDS * lines * CACHE_LINE;
  unsigned i;

  ctr->n = n;
  ctr->stride = lines * CELLS_PER_LINE;
  ctr->cells = aligned_alloc (CACHE_LINE, size ? size : CACHE_LINE);
  if (ctr->cells == NULL)
    return -1;
  for (i = 0; i < SHARDCTR_SHARDS * ctr->stride; ++i)
    atomic_init (&ctr->cells[i], 0);
  return 0;
}

void
shardctr_free (struct shardctr *ctr)
{
  free (ctr->cells);
  ctr->cells = NULL;
}

/* The shard of the calling thread.  Why not a _Thread_local index: in
 * a dlopen'd filter that is dynamic TLS, which ThreadSanitizer sees
 * reused across threads (common/scratch.c).  On glibc pthread_self()
 * is the address of the thread's descriptor, a few instructions to
 * read; threads' descriptors lie far apart, so a multiplicative hash
 * of the address spreads them over the shards.
 */
static unsigned
my_shard (void)
{
  uint64_t id = (uint64_t) (uintptr_t) pthread_self ();
  return ((id * UINT64_C (0x9e3779b97f4a7c15)) >> 32) % SHARDCTR_SHARDS;
}

void
shardctr_add (struct shardctr *ctr, unsigned i, uint64_t delta)
{
  atomic_fetch_add_explicit (&ctr->cells[my_shard () * ctr->stride + i],
                             delta, memory_order_relaxed);
}

uint64_t
shardctr_sum (const struct shardctr *ctr, unsigned i)
{
  uint64_t sum = 0;
  unsigned s;

  for (s = 0; s < SHARDCTR_SHARDS; ++s)
    sum += atomic_load_explicit (&ctr->cells[s * ctr->stride + i],
                                 memory_order_relaxed);
  return sum;
}
