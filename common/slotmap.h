/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A table of uint32_t values for a fixed number of entries, every
 * entry starting at 0, in leaves of 1024 entries (4 KiB) allocated on
 * first use.  Memory grows with the leaves reserved, never with the
 * number of entries: leaves hang under inner nodes of 512 pointers,
 * as many levels as the entries need, below a root of at most 4096.
 * A kept overlay of format version 3 holds in it the slot of each
 * block (docs/overlay-format.md); a throw-away overlay the slot of
 * each chunk of its disk in the temporary files.
 *
 * slotmap_get takes no lock and may run beside one slotmap_reserve or
 * slotmap_set: nodes and leaves are published with release and read
 * with acquire, entries are read and written whole (relaxed atomics),
 * so a reader sees an entry's old or new value.  The caller serializes
 * slotmap_reserve, slotmap_set and slotmap_free among themselves, and
 * slotmap_each with them.
 */

#ifndef COMMON_SLOTMAP_H
#define COMMON_SLOTMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLOTMAP_LEAF_ENTRIES 1024
#define SLOTMAP_NODE_CHILDREN 512
#define SLOTMAP_ROOT_MAX 4096

struct slotmap {
  uint64_t entries;
  void **root;                  /* root_children of them */
  uint64_t root_children;
  unsigned height;              /* levels of inner nodes below the root */
  size_t bytes;                 /* memory held */
};

#define SLOTMAP_INIT { .entries = 0, .root = NULL, .root_children = 0, \
                       .height = 0, .bytes = 0 }

/* An empty map of entries entries.  Returns 0, or -1 with errno set
 * (ENOMEM).
 */
extern int slotmap_init (struct slotmap *map, uint64_t entries);

/* Entry i, i < entries, walking the inner nodes: slotmap_get's path
 * for a map that has them.
 */
extern uint32_t slotmap_get_walk (const struct slotmap *map, uint64_t i);

/* Entry i, i < entries.  Inline for the common map with no inner
 * nodes (up to 4M entries): a read of the root and one of the leaf.
 */
static inline uint32_t
slotmap_get (const struct slotmap *map, uint64_t i)
{
  const uint32_t *leaf;

  if (map->height > 0)
    return slotmap_get_walk (map, i);
  leaf = __atomic_load_n (&map->root[i / SLOTMAP_LEAF_ENTRIES],
                          __ATOMIC_ACQUIRE);
  if (leaf == NULL)
    return 0;
  return __atomic_load_n (&leaf[i % SLOTMAP_LEAF_ENTRIES], __ATOMIC_RELAXED);
}

/* Allocates the leaves of entries [i, i+n), so that slotmap_set on
 * them cannot fail.  Returns 0, or -1 with errno set (ENOMEM).
 */
extern int slotmap_reserve (struct slotmap *map, uint64_t i, uint64_t n);

/* Entry i set, walking the inner nodes: slotmap_set's path for a map
 * that has them, or for a leaf not reserved.
 */
extern void slotmap_set_walk (struct slotmap *map, uint64_t i, uint32_t value);

/* Sets entry i.  A non-zero value needs the entry reserved; 0 never
 * allocates.  Inline for a reserved entry of a map with no inner nodes.
 */
static inline void
slotmap_set (struct slotmap *map, uint64_t i, uint32_t value)
{
  uint32_t *leaf = NULL;

  if (map->height == 0)
    leaf = __atomic_load_n (&map->root[i / SLOTMAP_LEAF_ENTRIES],
                            __ATOMIC_RELAXED);
  if (leaf == NULL)
    slotmap_set_walk (map, i, value);
  else
    __atomic_store_n (&leaf[i % SLOTMAP_LEAF_ENTRIES], value,
                      __ATOMIC_RELAXED);
}

/* Sets each entry of [i, i+n) that is below value to value (the marks
 * of changes.h only grow).  Unlike slotmap_set it may run beside
 * slotmap_reserve and other raises (each entry is raised with a
 * compare-and-swap).  Returns false if a leaf of the range is not
 * reserved, having raised the entries before it.
 */
extern bool slotmap_raise (struct slotmap *map, uint64_t i, uint64_t n,
                           uint32_t value);

/* Calls fn (i, value, opaque) for every entry whose value is not 0, in
 * ascending order.  Stops at and returns the first non-zero return;
 * returns 0.
 */
typedef int slotmap_each_fn (uint64_t i, uint32_t value, void *opaque);
extern int slotmap_each (const struct slotmap *map, slotmap_each_fn *fn,
                         void *opaque);

extern void slotmap_free (struct slotmap *map);

#endif /* COMMON_SLOTMAP_H */
