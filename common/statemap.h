/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A sparse array of 2-bit states indexed by any uint64_t, every entry
 * starting at 0.  Memory grows with the leaves that hold a non-zero
 * state, never with the range of indexes: an empty map of 2^64 entries
 * costs nothing.
 *
 * It is a radix tree: leaves of 4096 entries (1 KiB) under inner nodes
 * of 256 children, as many levels as the highest index reserved needs.
 *
 * Not thread-safe: the caller serializes every call.
 */

#ifndef COMMON_STATEMAP_H
#define COMMON_STATEMAP_H

#include <stddef.h>
#include <stdint.h>

struct statemap {
  void *root;            /* leaf (height 0) or inner node, NULL if empty */
  unsigned height;       /* levels of inner nodes above the leaves */
  size_t bytes;          /* memory held by the nodes */
};

#define STATEMAP_INIT { .root = NULL, .height = 0, .bytes = 0 }

/* State of entry i. */
extern unsigned statemap_get (const struct statemap *map, uint64_t i);

/* Sets *state to the state of entry i and returns the first index in
 * (i, end] whose state differs, or end.  Requires i < end.
 */
extern uint64_t statemap_run (const struct statemap *map,
                              uint64_t i, uint64_t end, unsigned *state);

/* Allocates the nodes that entries [i, i+n) need, so that a later
 * statemap_set on them cannot fail.  Returns 0, or -1 with errno set
 * (ENOMEM); the map is unchanged in content either way.
 */
extern int statemap_reserve (struct statemap *map, uint64_t i, uint64_t n);

/* Sets entries [i, i+n) to state (0..3).  A non-zero state needs the
 * range reserved first; setting 0 never allocates.
 */
extern void statemap_set (struct statemap *map, uint64_t i, uint64_t n,
                          unsigned state);

/* Entries [i, i+n) packed as the leaves hold them: entry i+j in byte
 * j/4, bits 2*(j%4) and up.  The kept overlay stores its state area
 * in this packing (docs/overlay-format.md).  Requires i and n to be
 * multiples of 4 and i + n not to wrap; out holds n/4 bytes.
 */
extern void statemap_export (const struct statemap *map, uint64_t i,
                             uint64_t n, uint8_t *out);

/* Sets entries [i, i+n) from the packing of statemap_export.  Returns
 * 0, or -1 with errno set (ENOMEM), the entries then partly set.
 */
extern int statemap_import (struct statemap *map, uint64_t i, uint64_t n,
                            const uint8_t *in);

/* Frees every node; the map is empty afterwards. */
extern void statemap_free (struct statemap *map);

#endif /* COMMON_STATEMAP_H */
