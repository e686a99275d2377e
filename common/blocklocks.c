/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

#include <config.h>

#include <pthread.h>

#include "blocklocks.h"

void
blocklocks_init (struct blocklocks *locks)
{
  unsigned s;

  for (s = 0; s < BLOCKLOCKS_SLOTS; ++s) {
    pthread_mutex_init (&locks->slot[s].lock, NULL);
    pthread_cond_init (&locks->slot[s].released, NULL);
    locks->slot[s].busy = false;
  }
}

void
blocklocks_destroy (struct blocklocks *locks)
{
  unsigned s;

  for (s = 0; s < BLOCKLOCKS_SLOTS; ++s) {
    pthread_mutex_destroy (&locks->slot[s].lock);
    pthread_cond_destroy (&locks->slot[s].released);
  }
}

/* The slots of blocks [first, first+n) as at most two ascending
 * intervals [lo[k], hi[k]).  Returns how many intervals.
 */
static unsigned
slot_intervals (uint64_t first, uint64_t n, unsigned lo[2], unsigned hi[2])
{
  unsigned start = first % BLOCKLOCKS_SLOTS;

  if (n >= BLOCKLOCKS_SLOTS) {
    lo[0] = 0;
    hi[0] = BLOCKLOCKS_SLOTS;
    return 1;
  }
  if (start + n <= BLOCKLOCKS_SLOTS) {
    lo[0] = start;
    hi[0] = start + n;
    return 1;
  }
  /* The range wraps: the low slots come first in ascending order. */
  lo[0] = 0;
  hi[0] = start + n - BLOCKLOCKS_SLOTS;
  lo[1] = start;
  hi[1] = BLOCKLOCKS_SLOTS;
  return 2;
}

static void
claim (struct blocklocks_slot *slot)
{
  pthread_mutex_lock (&slot->lock);
  while (slot->busy)
    pthread_cond_wait (&slot->released, &slot->lock);
  slot->busy = true;
  pthread_mutex_unlock (&slot->lock);
}

static void
release (struct blocklocks_slot *slot)
{
  pthread_mutex_lock (&slot->lock);
  slot->busy = false;
  pthread_cond_broadcast (&slot->released);
  pthread_mutex_unlock (&slot->lock);
}

void
blocklocks_lock (struct blocklocks *locks, uint64_t first, uint64_t n)
{
  unsigned lo[2], hi[2], k, s, nr = slot_intervals (first, n, lo, hi);

  for (k = 0; k < nr; ++k)
    for (s = lo[k]; s < hi[k]; ++s)
      claim (&locks->slot[s]);
}

void
blocklocks_unlock (struct blocklocks *locks, uint64_t first, uint64_t n)
{
  unsigned lo[2], hi[2], k, s, nr = slot_intervals (first, n, lo, hi);

  for (k = 0; k < nr; ++k)
    for (s = lo[k]; s < hi[k]; ++s)
      release (&locks->slot[s]);
}
