/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of slotmap.h: random sets and raises against a flat model
 * across leaf edges, walked in order by slotmap_each; unreserved leaves
 * reading 0; memory that grows with the leaves reserved, for a map of
 * 2^51 entries too (an 8 EiB disk of 4K blocks); and a reader thread
 * beside a writer seeing each entry's old or new value only (run under
 * TSan in CI).
 */

#include <config.h>

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "slotmap.h"

#define ENTRIES (10 * SLOTMAP_LEAF_ENTRIES + 17)   /* a short last leaf */
#define ROUNDS 50000

static uint32_t model[ENTRIES];

static void
fail (const char *what, uint64_t i)
{
  fprintf (stderr, "test-slotmap: %s at entry %" PRIu64 "\n", what, i);
  exit (EXIT_FAILURE);
}

static void
check_model (const struct slotmap *map)
{
  uint64_t i;

  for (i = 0; i < ENTRIES; ++i)
    if (slotmap_get (map, i) != model[i])
      fail ("get differs from the model", i);
}

/* slotmap_each must visit exactly the non-zero entries, in order. */
struct walk {
  uint64_t next;                /* the entry after the last visited */
};

static int
visit (uint64_t i, uint32_t value, void *opaque)
{
  struct walk *walk = opaque;

  for (; walk->next < i; walk->next++)
    if (model[walk->next] != 0)
      fail ("each skipped a non-zero entry", walk->next);
  if (i != walk->next || value == 0 || model[i] != value)
    fail ("each visited a wrong entry", i);
  walk->next = i + 1;
  return 0;
}

static void
check_each (const struct slotmap *map)
{
  struct walk walk = { .next = 0 };

  slotmap_each (map, visit, &walk);
  for (; walk.next < ENTRIES; walk.next++)
    if (model[walk.next] != 0)
      fail ("each missed a non-zero entry", walk.next);
}

static void
test_model (void)
{
  struct slotmap map;
  unsigned r;

  if (slotmap_init (&map, ENTRIES) == -1)
    fail ("init", 0);
  check_model (&map);
  srand (1);
  for (r = 0; r < ROUNDS; ++r) {
    uint64_t i = (uint64_t) rand () % ENTRIES;
    uint32_t v = rand () % 3 == 0 ? 0 : (uint32_t) rand ();

    /* Clearing an entry of a leaf never reserved allocates nothing. */
    if (v != 0 && slotmap_reserve (&map, i, 1) == -1)
      fail ("reserve", i);
    slotmap_set (&map, i, v);
    model[i] = v;
  }
  check_model (&map);
  check_each (&map);
  /* Raising runs across leaf edges sets only the entries below. */
  for (r = 0; r < ROUNDS / 10; ++r) {
    uint64_t i = (uint64_t) rand () % ENTRIES, j;
    uint64_t n = 1 + (uint64_t) rand () % (3 * SLOTMAP_LEAF_ENTRIES);
    uint32_t v = (uint32_t) rand ();

    n = i + n > ENTRIES ? ENTRIES - i : n;
    if (slotmap_reserve (&map, i, n) == -1)
      fail ("reserve", i);
    slotmap_raise (&map, i, n, v);
    for (j = i; j < i + n; ++j)
      model[j] = model[j] < v ? v : model[j];
  }
  check_model (&map);
  if (slotmap_reserve (&map, ENTRIES - 3, 3) == -1)
    fail ("reserve of the last leaf", ENTRIES - 3);
  slotmap_free (&map);
}

/* The memory of one more leaf: the leaf, and at most a node per level
 * above it.
 */
static size_t
one_leaf (const struct slotmap *map)
{
  return SLOTMAP_LEAF_ENTRIES * sizeof (uint32_t) +
         map->height * SLOTMAP_NODE_CHILDREN * sizeof (void *);
}

/* Leaves, and the nodes above them, cost memory only once reserved,
 * however many entries the map has.
 */
static void
test_memory (uint64_t big)
{
  struct slotmap map;
  size_t before;

  if (slotmap_init (&map, big) == -1)
    fail ("init of a large map", 0);
  before = map.bytes;
  if (before > SLOTMAP_ROOT_MAX * sizeof (void *))
    fail ("a root larger than its maximum", big);
  slotmap_set (&map, big - 1, 0);
  if (slotmap_get (&map, big - 1) != 0 || map.bytes != before)
    fail ("clearing allocated", big - 1);
  if (slotmap_reserve (&map, big - 2, 2) == -1)
    fail ("reserve", big - 2);
  slotmap_set (&map, big - 1, 7);
  if (slotmap_get (&map, big - 1) != 7 || slotmap_get (&map, big - 2) != 0 ||
      slotmap_get (&map, 0) != 0 || map.bytes > before + one_leaf (&map))
    fail ("one leaf", big - 1);
  slotmap_free (&map);
}

/* The writer counts every entry up from 1 while the reader checks that
 * no entry ever goes down or is read torn.
 */
#define COUNT_TO 200

struct race {
  struct slotmap map;
  volatile int done;
};

static void *
reader (void *arg)
{
  struct race *race = arg;
  uint32_t seen[2 * SLOTMAP_LEAF_ENTRIES] = { 0 };

  while (!__atomic_load_n (&race->done, __ATOMIC_ACQUIRE)) {
    uint64_t i;
    for (i = 0; i < 2 * SLOTMAP_LEAF_ENTRIES; ++i) {
      uint32_t v = slotmap_get (&race->map, i);
      if (v < seen[i] || v > COUNT_TO)
        fail ("reader saw a value go back or a torn value", i);
      seen[i] = v;
    }
  }
  return NULL;
}

static void
test_race (void)
{
  struct race race = { .done = 0 };
  pthread_t thread;
  uint32_t v;
  uint64_t i;

  if (slotmap_init (&race.map, 2 * SLOTMAP_LEAF_ENTRIES) == -1)
    fail ("init", 0);
  if (pthread_create (&thread, NULL, reader, &race) != 0)
    fail ("pthread_create", 0);
  for (v = 1; v <= COUNT_TO; ++v)
    for (i = 0; i < 2 * SLOTMAP_LEAF_ENTRIES; ++i) {
      if (v == 1 && slotmap_reserve (&race.map, i, 1) == -1)
        fail ("reserve", i);
      slotmap_set (&race.map, i, v);
    }
  __atomic_store_n (&race.done, 1, __ATOMIC_RELEASE);
  pthread_join (thread, NULL);
  slotmap_free (&race.map);
}

int
main (void)
{
  test_model ();
  test_memory (UINT64_C (1) << 30);     /* a 64 TiB base of 64K blocks */
  test_memory (UINT64_C (1) << 51);     /* an 8 EiB base of 4K blocks */
  test_race ();
  return EXIT_SUCCESS;
}
