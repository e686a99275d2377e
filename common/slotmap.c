/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "divround.h"
#include "slotmap.h"

static uint32_t *
leaf_of (const struct slotmap *map, uint64_t i)
{
  return __atomic_load_n (&map->leaves[i / SLOTMAP_LEAF_ENTRIES],
                          __ATOMIC_ACQUIRE);
}

int
slotmap_init (struct slotmap *map, uint64_t entries)
{
  uint64_t n = div_round_up (entries, SLOTMAP_LEAF_ENTRIES);

  map->entries = entries;
  map->bytes = 0;
  if (n > SIZE_MAX / sizeof *map->leaves) {
    errno = ENOMEM;
    return -1;
  }
  map->leaves = calloc (n ? n : 1, sizeof *map->leaves);
  if (map->leaves == NULL)
    return -1;
  map->bytes = n * sizeof *map->leaves;
  return 0;
}

uint32_t
slotmap_get (const struct slotmap *map, uint64_t i)
{
  uint32_t *leaf = leaf_of (map, i);

  assert (i < map->entries);
  if (leaf == NULL)
    return 0;
  return __atomic_load_n (&leaf[i % SLOTMAP_LEAF_ENTRIES], __ATOMIC_RELAXED);
}

int
slotmap_reserve (struct slotmap *map, uint64_t i, uint64_t n)
{
  uint64_t k, last;

  if (n == 0)
    return 0;
  assert (i + n <= map->entries);
  last = (i + n - 1) / SLOTMAP_LEAF_ENTRIES;
  for (k = i / SLOTMAP_LEAF_ENTRIES; k <= last; ++k) {
    uint32_t *leaf;

    if (map->leaves[k] != NULL)
      continue;
    leaf = calloc (SLOTMAP_LEAF_ENTRIES, sizeof *leaf);
    if (leaf == NULL)
      return -1;
    map->bytes += SLOTMAP_LEAF_ENTRIES * sizeof *leaf;
    __atomic_store_n (&map->leaves[k], leaf, __ATOMIC_RELEASE);
  }
  return 0;
}

void
slotmap_set (struct slotmap *map, uint64_t i, uint32_t value)
{
  uint32_t *leaf;

  assert (i < map->entries);
  leaf = map->leaves[i / SLOTMAP_LEAF_ENTRIES];
  if (leaf == NULL) {
    assert (value == 0);
    return;
  }
  __atomic_store_n (&leaf[i % SLOTMAP_LEAF_ENTRIES], value, __ATOMIC_RELAXED);
}

void
slotmap_free (struct slotmap *map)
{
  uint64_t k, n = div_round_up (map->entries, SLOTMAP_LEAF_ENTRIES);

  if (map->leaves != NULL)
    for (k = 0; k < n; ++k)
      free (map->leaves[k]);
  free (map->leaves);
  map->leaves = NULL;
  map->bytes = 0;
}
