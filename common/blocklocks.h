/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* A table of locks keyed by block number, for locking ranges of
 * blocks.  The blocks fall into groups of BLOCKLOCKS_SLOTS consecutive
 * blocks; within a group, consecutive blocks map to consecutive slots
 * (wrapping), and each group starts at its own slot, spread by a hash
 * of the group number (blocklocks_slot).
 *
 * Why the spread: with block % BLOCKLOCKS_SLOTS, ranges a multiple of
 * BLOCKLOCKS_SLOTS blocks apart share every slot.  Clients that split
 * a disk among their connections split it at such strides (fio's jobs,
 * nbdcopy's connections), so their sequential writes met in every
 * slot and ran in lockstep, slower than one connection
 * (docs/performance.md).
 *
 * Each slot is a busy flag guarded by its own small mutex and
 * condition variable.  A range is locked by claiming its slots one at
 * a time in ascending slot order and unlocked by releasing them.
 * Because every thread claims in the same global order, and claims
 * one range at a time, no cycle of waiters can form: no deadlock.
 * Only one slot mutex is ever held, and only for a moment, so the
 * table holds no pthread mutex across the caller's I/O (the busy
 * flags do that) and stays within ThreadSanitizer's limit of 64 held
 * mutexes however long the range.
 *
 * Rules for callers: hold at most one locked range at a time, and
 * unlock exactly the range that was locked.
 */

#ifndef COMMON_BLOCKLOCKS_H
#define COMMON_BLOCKLOCKS_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define BLOCKLOCKS_SLOTS 1024

/* The slot of block b. */
static inline unsigned
blocklocks_slot (uint64_t b)
{
  uint64_t group = b / BLOCKLOCKS_SLOTS;
  /* Fibonacci hashing: the top bits of group times 2^64 / phi. */
  uint64_t spread = (group * UINT64_C (0x9E3779B97F4A7C15)) >> 32;

  return (unsigned) ((b + spread) % BLOCKLOCKS_SLOTS);
}

struct blocklocks_slot {
  pthread_mutex_t lock;         /* protects busy */
  pthread_cond_t released;      /* signalled when busy goes false */
  bool busy;
};

struct blocklocks {
  struct blocklocks_slot slot[BLOCKLOCKS_SLOTS];
};

extern void blocklocks_init (struct blocklocks *locks);
extern void blocklocks_destroy (struct blocklocks *locks);

/* Locks blocks [first, first+n), n >= 1, waiting for other holders. */
extern void blocklocks_lock (struct blocklocks *locks,
                             uint64_t first, uint64_t n);

/* Unlocks what blocklocks_lock (locks, first, n) locked. */
extern void blocklocks_unlock (struct blocklocks *locks,
                               uint64_t first, uint64_t n);

#endif /* COMMON_BLOCKLOCKS_H */
