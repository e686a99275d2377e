/* Unit test of blocklocks.h: threads lock random, overlapping ranges,
 * some across groups, and check that nobody else is inside any block
 * of theirs.  A deadlock shows as the test hanging (make check's
 * timeout); an exclusion failure as a counter that is not 1.  Also the
 * slot mapping: consecutive within a group, spread across groups.
 */

#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "blocklocks.h"

#define THREADS 8
#define ROUNDS 3000
#define BLOCKS (3 * BLOCKLOCKS_SLOTS)   /* blocks sharing slots */

static struct blocklocks locks;
static atomic_int inside[BLOCKS];
static atomic_int failed;

static void *
worker (void *arg)
{
  unsigned seed = (unsigned) (uintptr_t) arg;
  unsigned r;

  for (r = 0; r < ROUNDS; ++r) {
    uint64_t first = rand_r (&seed) % BLOCKS;
    uint64_t n, b;

    switch (rand_r (&seed) % 4) {
    case 0: n = 1 + rand_r (&seed) % (2 * BLOCKLOCKS_SLOTS); break;
    case 1: first = BLOCKLOCKS_SLOTS - 1 - rand_r (&seed) % 4; /* 2 groups */
            n = 2 + rand_r (&seed) % 8; break;
    default: n = 1 + rand_r (&seed) % 4; break;
    }
    if (first + n > BLOCKS)
      n = BLOCKS - first;

    blocklocks_lock (&locks, first, n);
    for (b = first; b < first + n; ++b)
      if (atomic_fetch_add (&inside[b], 1) != 0)
        atomic_store (&failed, 1);
    for (b = first; b < first + n; ++b)
      atomic_fetch_sub (&inside[b], 1);
    blocklocks_unlock (&locks, first, n);
  }
  return NULL;
}

static void
check (int ok, const char *what, uint64_t b)
{
  if (!ok) {
    fprintf (stderr, "test-blocklocks: %s (block %" PRIu64 ")\n", what, b);
    exit (EXIT_FAILURE);
  }
}

/* Within a group, block b+1 takes the slot after b's.  Blocks a
 * multiple of BLOCKLOCKS_SLOTS apart, at the strides at which clients
 * split disks among connections, take different slots.
 */
static void
check_slots (void)
{
  static const uint64_t strides[] = { 1, 16, 64, 256 };
  uint64_t b, k, j;
  unsigned i;

  for (b = 0; b < 4 * BLOCKLOCKS_SLOTS; ++b)
    if ((b + 1) % BLOCKLOCKS_SLOTS != 0)
      check (blocklocks_slot (b + 1) ==
             (blocklocks_slot (b) + 1) % BLOCKLOCKS_SLOTS,
             "consecutive blocks of a group in non-consecutive slots", b);
  for (i = 0; i < sizeof strides / sizeof strides[0]; ++i) {
    uint64_t stride = strides[i] * BLOCKLOCKS_SLOTS;
    for (k = 0; k < 8; ++k)
      for (j = k + 1; j < 8; ++j)
        check (blocklocks_slot (k * stride) != blocklocks_slot (j * stride),
               "blocks at a power-of-two stride share a slot", j * stride);
  }
}

int
main (void)
{
  pthread_t t[THREADS];
  uintptr_t i;

  check_slots ();
  blocklocks_init (&locks);
  for (i = 0; i < THREADS; ++i)
    if (pthread_create (&t[i], NULL, worker, (void *) (i + 1)) != 0) {
      perror ("pthread_create");
      exit (EXIT_FAILURE);
    }
  for (i = 0; i < THREADS; ++i)
    pthread_join (t[i], NULL);
  blocklocks_destroy (&locks);

  if (failed) {
    fprintf (stderr, "two threads were inside the same block\n");
    exit (EXIT_FAILURE);
  }
  return EXIT_SUCCESS;
}
