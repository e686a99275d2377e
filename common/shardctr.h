/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Counters that many threads add to on the request path and one thread
 * now and then sums.
 *
 * Why shards: one atomic counter shared by every worker thread bounces
 * its cache line between the cores on every request, the contention the
 * filter's fine-grained locking exists to avoid.  Here each counter has
 * SHARDCTR_SHARDS cells, each shard on its own cache lines; a thread
 * adds to the cell of the shard its thread id hashes to, so threads
 * rarely share a line.  Adds are relaxed atomics (a sum only needs every
 * add counted once, in no particular order), so two threads that do
 * share a shard stay correct.
 *
 * A sum reads the cells one by one while adds go on: it is some value
 * between the totals before and after the sum, which is all statistics
 * need.
 */

#ifndef COMMON_SHARDCTR_H
#define COMMON_SHARDCTR_H

#include <stdatomic.h>
#include <stdint.h>

#define SHARDCTR_SHARDS 16

struct shardctr {
  unsigned n;                   /* counters */
  unsigned stride;              /* cells from one shard to the next */
  _Atomic uint64_t *cells;      /* SHARDCTR_SHARDS * stride, all 0 at first */
};

/* Makes n counters, all 0.  Returns 0, or -1 with errno set (ENOMEM). */
extern int shardctr_init (struct shardctr *ctr, unsigned n);

extern void shardctr_free (struct shardctr *ctr);

/* Adds delta to counter i (< n) from the calling thread's shard. */
extern void shardctr_add (struct shardctr *ctr, unsigned i, uint64_t delta);

/* The total of counter i over all shards. */
extern uint64_t shardctr_sum (const struct shardctr *ctr, unsigned i);

#endif /* COMMON_SHARDCTR_H */
