/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The sparse table of slot values (slotmap.h). */

#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

#include "divround.h"
#include "slotmap.h"

#define NODE_SHIFT 9            /* log2 of SLOTMAP_NODE_CHILDREN */

/* The child of an inner node, or of the root, that a reader follows. */
static void *
child (void *const *slot)
{
  return __atomic_load_n (slot, __ATOMIC_ACQUIRE);
}

/* Where the node of the given level (height: a child of the root)
 * above leaf hangs in its parent p.
 */
static void **
slot_in (void **p, uint64_t leaf, unsigned level)
{
  return &p[(leaf >> (NODE_SHIFT * level)) % SLOTMAP_NODE_CHILDREN];
}

static void **
root_slot (const struct slotmap *map, uint64_t leaf)
{
  return &map->root[leaf >> (NODE_SHIFT * map->height)];
}

int
slotmap_init (struct slotmap *map, uint64_t entries)
{
  uint64_t children = div_round_up (entries, SLOTMAP_LEAF_ENTRIES);

  map->entries = entries;
  map->height = 0;
  map->bytes = 0;
  while (children > SLOTMAP_ROOT_MAX) {
    children = div_round_up (children, SLOTMAP_NODE_CHILDREN);
    map->height++;
  }
  map->root_children = children ? children : 1;
  map->root = calloc (map->root_children, sizeof *map->root);
  if (map->root == NULL)
    return -1;
  map->bytes = map->root_children * sizeof *map->root;
  return 0;
}

/* Leaf number leaf as a reader finds it, or NULL. */
static uint32_t *
read_leaf (const struct slotmap *map, uint64_t leaf)
{
  unsigned level = map->height;
  void *p = child (root_slot (map, leaf));

  while (p != NULL && level > 0) {
    level--;
    p = child (slot_in (p, leaf, level));
  }
  return p;
}

uint32_t
slotmap_get_walk (const struct slotmap *map, uint64_t i)
{
  const uint32_t *entries;

  assert (i < map->entries);
  entries = read_leaf (map, i / SLOTMAP_LEAF_ENTRIES);
  if (entries == NULL)
    return 0;
  return __atomic_load_n (&entries[i % SLOTMAP_LEAF_ENTRIES],
                          __ATOMIC_RELAXED);
}

/* Allocates leaf and the inner nodes above it.  Returns 0, or -1 with
 * errno set.
 */
static int
reserve_leaf (struct slotmap *map, uint64_t leaf)
{
  void **slot = root_slot (map, leaf);
  unsigned level = map->height;

  for (;;) {
    void *p = *slot;

    if (p == NULL) {
      size_t size = level > 0 ? SLOTMAP_NODE_CHILDREN * sizeof (void *)
                              : SLOTMAP_LEAF_ENTRIES * sizeof (uint32_t);
      p = calloc (1, size);
      if (p == NULL)
        return -1;
      map->bytes += size;
      __atomic_store_n (slot, p, __ATOMIC_RELEASE);
    }
    if (level == 0)
      return 0;
    level--;
    slot = slot_in (p, leaf, level);
  }
}

int
slotmap_reserve (struct slotmap *map, uint64_t i, uint64_t n)
{
  uint64_t leaf, last;

  if (n == 0)
    return 0;
  assert (i + n <= map->entries);
  last = (i + n - 1) / SLOTMAP_LEAF_ENTRIES;
  for (leaf = i / SLOTMAP_LEAF_ENTRIES; leaf <= last; ++leaf)
    if (reserve_leaf (map, leaf) == -1)
      return -1;
  return 0;
}

void
slotmap_set_walk (struct slotmap *map, uint64_t i, uint32_t value)
{
  uint32_t *entries;

  assert (i < map->entries);
  entries = read_leaf (map, i / SLOTMAP_LEAF_ENTRIES);
  if (entries == NULL) {
    assert (value == 0);
    return;
  }
  __atomic_store_n (&entries[i % SLOTMAP_LEAF_ENTRIES], value,
                    __ATOMIC_RELAXED);
}

/* Raises *e to value if it is below, whoever else raises it. */
static void
raise_entry (uint32_t *e, uint32_t value)
{
  uint32_t old = __atomic_load_n (e, __ATOMIC_RELAXED);

  while (old < value &&
         !__atomic_compare_exchange_n (e, &old, value, true, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED))
    ;
}

/* One lookup of a leaf for all of its entries in the range. */
bool
slotmap_raise (struct slotmap *map, uint64_t i, uint64_t n, uint32_t value)
{
  uint64_t end = i + n;

  assert (end <= map->entries);
  while (i < end) {
    uint64_t leaf = i / SLOTMAP_LEAF_ENTRIES;
    uint64_t stop = (leaf + 1) * SLOTMAP_LEAF_ENTRIES;
    uint32_t *entries = read_leaf (map, leaf);

    if (entries == NULL)
      return false;
    for (stop = stop < end ? stop : end; i < stop; ++i)
      raise_entry (&entries[i % SLOTMAP_LEAF_ENTRIES], value);
  }
  return true;
}

/* slotmap_each below p, a node of level (0: a leaf) whose first leaf
 * is first.
 */
static int
each_below (void *p, unsigned level, uint64_t first, slotmap_each_fn *fn,
            void *opaque)
{
  unsigned k;
  int r;

  if (level == 0) {
    const uint32_t *entries = p;

    for (k = 0; k < SLOTMAP_LEAF_ENTRIES; ++k)
      if (entries[k] != 0 &&
          (r = fn (first * SLOTMAP_LEAF_ENTRIES + k, entries[k], opaque)))
        return r;
    return 0;
  }
  for (k = 0; k < SLOTMAP_NODE_CHILDREN; ++k) {
    void *c = ((void **) p)[k];
    uint64_t below = (uint64_t) k << (NODE_SHIFT * (level - 1));

    if (c != NULL && (r = each_below (c, level - 1, first + below, fn, opaque)))
      return r;
  }
  return 0;
}

int
slotmap_each (const struct slotmap *map, slotmap_each_fn *fn, void *opaque)
{
  uint64_t k;
  int r;

  for (k = 0; k < map->root_children; ++k)
    if (map->root[k] != NULL &&
        (r = each_below (map->root[k], map->height,
                         k << (NODE_SHIFT * map->height), fn, opaque)))
      return r;
  return 0;
}

static void
free_below (void *p, unsigned level)
{
  unsigned k;

  if (p == NULL)
    return;
  if (level > 0)
    for (k = 0; k < SLOTMAP_NODE_CHILDREN; ++k)
      free_below (((void **) p)[k], level - 1);
  free (p);
}

void
slotmap_free (struct slotmap *map)
{
  uint64_t k;

  if (map->root != NULL)
    for (k = 0; k < map->root_children; ++k)
      free_below (map->root[k], map->height);
  free (map->root);
  map->root = NULL;
  map->bytes = 0;
}
