/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

#include <config.h>

#include <pthread.h>
#include <string.h>

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

/* The slots of blocks [first, first+n), as a bitmap. */
struct slot_set {
  uint64_t word[BLOCKLOCKS_SLOTS / 64];
};

static void
add_slot (struct slot_set *set, unsigned s)
{
  set->word[s / 64] |= UINT64_C (1) << (s % 64);
}

static void
slots_of_range (uint64_t first, uint64_t n, struct slot_set *set)
{
  uint64_t b;
  unsigned w;

  if (n >= BLOCKLOCKS_SLOTS) {          /* more than every slot once */
    for (w = 0; w < BLOCKLOCKS_SLOTS / 64; ++w)
      set->word[w] = UINT64_MAX;
    return;
  }
  memset (set, 0, sizeof *set);
  for (b = first; b < first + n; ++b)
    add_slot (set, blocklocks_slot (b));
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

/* Claims or releases every slot of the set, in ascending order. */
static void
for_each_slot (struct blocklocks *locks, const struct slot_set *set,
               void (*fn) (struct blocklocks_slot *))
{
  unsigned w;

  for (w = 0; w < BLOCKLOCKS_SLOTS / 64; ++w) {
    uint64_t bits = set->word[w];
    while (bits) {
      unsigned s = w * 64 + (unsigned) __builtin_ctzll (bits);
      fn (&locks->slot[s]);
      bits &= bits - 1;
    }
  }
}

void
blocklocks_lock (struct blocklocks *locks, uint64_t first, uint64_t n)
{
  struct slot_set set;

  slots_of_range (first, n, &set);
  for_each_slot (locks, &set, claim);
}

void
blocklocks_unlock (struct blocklocks *locks, uint64_t first, uint64_t n)
{
  struct slot_set set;

  slots_of_range (first, n, &set);
  for_each_slot (locks, &set, release);
}
