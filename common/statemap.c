/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The sparse array of 2-bit states (statemap.h). */

#include <config.h>

#include <assert.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "statemap.h"

#define LEAF_SHIFT 12                           /* entries per leaf: 4096 */
#define LEAF_ENTRIES (UINT64_C (1) << LEAF_SHIFT)
#define LEAF_MASK (LEAF_ENTRIES - 1)
#define LEAF_BYTES (LEAF_ENTRIES / 4)           /* 2 bits an entry */
#define NODE_SHIFT 8                            /* children per node: 256 */
#define NODE_CHILDREN (1u << NODE_SHIFT)

/* log2 of how many entries a node at this height spans. */
static unsigned
span_shift (unsigned height)
{
  return LEAF_SHIFT + NODE_SHIFT * height;
}

static bool
covers (const struct statemap *map, uint64_t i)
{
  unsigned s = span_shift (map->height);
  return s >= 64 || (i >> s) == 0;
}

static unsigned
child_index (uint64_t i, unsigned height)
{
  return (i >> span_shift (height - 1)) & (NODE_CHILDREN - 1);
}

/* The leaf holding entry i.  If there is none, returns NULL and sets
 * *hole_last to the last index of the empty span around i, so that
 * scans skip whole missing subtrees instead of walking them leaf by
 * leaf.
 */
static uint8_t *
find_leaf (const struct statemap *map, uint64_t i, uint64_t *hole_last)
{
  void *node = map->root;
  unsigned h = map->height;

  if (!covers (map, i)) {
    *hole_last = UINT64_MAX;    /* nothing above the root's span */
    return NULL;
  }
  for (;;) {
    if (node == NULL) {
      unsigned s = span_shift (h);
      *hole_last = s >= 64 ? UINT64_MAX : i | ((UINT64_C (1) << s) - 1);
      return NULL;
    }
    if (h == 0)
      return node;
    node = ((void **) node)[child_index (i, h)];
    --h;
  }
}

static unsigned
leaf_get (const uint8_t *leaf, uint64_t j)
{
  return (leaf[j >> 2] >> ((j & 3) * 2)) & 3;
}

static void
leaf_put (uint8_t *leaf, uint64_t j, unsigned state)
{
  unsigned shift = (j & 3) * 2;
  leaf[j >> 2] = (uint8_t) ((leaf[j >> 2] & ~(3u << shift)) | (state << shift));
}

/* A byte holding four entries of this state. */
static uint8_t
byte_of (unsigned state)
{
  return (uint8_t) (state * 0x55);
}

/* Sets leaf entries [from, to): single entries up to a byte boundary,
 * then whole bytes.
 */
static void
leaf_set (uint8_t *leaf, uint64_t from, uint64_t to, unsigned state)
{
  for (; from < to && (from & 3) != 0; ++from)
    leaf_put (leaf, from, state);
  if (to - from >= 4) {
    memset (&leaf[from >> 2], byte_of (state), (to - from) >> 2);
    from += (to - from) & ~UINT64_C (3);
  }
  for (; from < to; ++from)
    leaf_put (leaf, from, state);
}

/* First entry in [from, to) of the leaf whose state is not state, or to. */
static uint64_t
leaf_scan (const uint8_t *leaf, uint64_t from, uint64_t to, unsigned state)
{
  for (; from < to && (from & 3) != 0; ++from)
    if (leaf_get (leaf, from) != state)
      return from;
  for (; to - from >= 4 && leaf[from >> 2] == byte_of (state); from += 4)
    ;
  for (; from < to; ++from)
    if (leaf_get (leaf, from) != state)
      return from;
  return to;
}

unsigned
statemap_get (const struct statemap *map, uint64_t i)
{
  uint64_t hole_last;
  const uint8_t *leaf = find_leaf (map, i, &hole_last);
  return leaf ? leaf_get (leaf, i & LEAF_MASK) : 0;
}

uint64_t
statemap_run (const struct statemap *map, uint64_t i, uint64_t end,
              unsigned *state)
{
  uint64_t hole_last;
  const uint8_t *leaf = find_leaf (map, i, &hole_last);
  unsigned s = leaf ? leaf_get (leaf, i & LEAF_MASK) : 0;

  *state = s;
  for (;;) {
    uint64_t base = i & ~LEAF_MASK, stop;

    if (leaf == NULL) {
      if (s != 0)
        return i;
      if (hole_last >= end - 1)
        return end;
      i = hole_last + 1;
    }
    else {
      stop = end - base > LEAF_MASK ? base + LEAF_ENTRIES : end;
      i = base + leaf_scan (leaf, i - base, stop - base, s);
      if (i < stop || i == end)
        return i;
    }
    leaf = find_leaf (map, i, &hole_last);
  }
}

static void *
node_alloc (struct statemap *map, size_t bytes)
{
  void *node = calloc (1, bytes);
  if (node)
    map->bytes += bytes;
  return node;
}

/* Adds levels above the root until it spans index last. */
static int
grow (struct statemap *map, uint64_t last)
{
  while (!covers (map, last)) {
    if (map->root != NULL) {
      void **node = node_alloc (map, NODE_CHILDREN * sizeof (void *));
      if (node == NULL)
        return -1;
      node[0] = map->root;
      map->root = node;
    }
    map->height++;
  }
  return 0;
}

/* Makes sure the leaf holding entry i exists. */
static int
ensure_leaf (struct statemap *map, uint64_t i)
{
  void **slot = &map->root;
  unsigned h;

  for (h = map->height; h > 0; --h) {
    if (*slot == NULL &&
        (*slot = node_alloc (map, NODE_CHILDREN * sizeof (void *))) == NULL)
      return -1;
    slot = &((void **) *slot)[child_index (i, h)];
  }
  if (*slot == NULL && (*slot = node_alloc (map, LEAF_BYTES)) == NULL)
    return -1;
  return 0;
}

int
statemap_reserve (struct statemap *map, uint64_t i, uint64_t n)
{
  uint64_t last, leaf;

  if (n == 0)
    return 0;
  last = i + n - 1;
  if (grow (map, last) == -1)
    return -1;
  for (leaf = i >> LEAF_SHIFT; leaf <= last >> LEAF_SHIFT; ++leaf)
    if (ensure_leaf (map, leaf << LEAF_SHIFT) == -1)
      return -1;
  return 0;
}

void
statemap_set (struct statemap *map, uint64_t i, uint64_t n, unsigned state)
{
  assert (state <= 3);
  while (n > 0) {
    uint64_t hole_last, chunk;
    uint8_t *leaf = find_leaf (map, i, &hole_last);

    if (leaf == NULL) {
      assert (state == 0);      /* non-zero states need statemap_reserve */
      if (hole_last - i >= n - 1)
        return;
      chunk = hole_last - i + 1;
    }
    else {
      uint64_t j = i & LEAF_MASK;
      chunk = n < LEAF_ENTRIES - j ? n : LEAF_ENTRIES - j;
      leaf_set (leaf, j, j + chunk, state);
    }
    i += chunk;
    n -= chunk;
  }
}

void
statemap_export (const struct statemap *map, uint64_t i, uint64_t n,
                 uint8_t *out)
{
  uint64_t j = 0;

  assert ((i & 3) == 0 && (n & 3) == 0);
  memset (out, 0, n >> 2);
  while (j < n) {
    unsigned state;
    uint64_t end = statemap_run (map, i + j, i + n, &state) - i;

    if (state != 0)
      leaf_set (out, j, end, state);
    j = end;
  }
}

int
statemap_import (struct statemap *map, uint64_t i, uint64_t n,
                 const uint8_t *in)
{
  uint64_t j = 0;

  assert ((i & 3) == 0 && (n & 3) == 0);
  while (j < n) {
    unsigned state = leaf_get (in, j);
    uint64_t end = leaf_scan (in, j + 1, n, state);

    if (state != 0 && statemap_reserve (map, i + j, end - j) == -1)
      return -1;
    statemap_set (map, i + j, end - j, state);
    j = end;
  }
  return 0;
}

static void
free_node (void *node, unsigned height)
{
  unsigned c;

  if (node == NULL)
    return;
  if (height > 0)
    for (c = 0; c < NODE_CHILDREN; ++c)
      free_node (((void **) node)[c], height - 1);
  free (node);
}

void
statemap_free (struct statemap *map)
{
  free_node (map->root, map->height);
  map->root = NULL;
  map->height = 0;
  map->bytes = 0;
}
