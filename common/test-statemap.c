/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of statemap.h: random sets against a flat model, in
 * windows placed at leaf and node boundaries and at the top of the
 * index space, plus the memory bound.
 */

#include <config.h>

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "statemap.h"

#define WINDOW 20000            /* entries per window, spans leaf edges */
#define NR_WINDOWS 5
#define ROUNDS 20000

static const uint64_t window_start[NR_WINDOWS] = {
  0,
  (UINT64_C (1) << 20) - 7000,  /* crosses a level-1 node edge */
  UINT64_C (1) << 50,           /* 8 EiB disk with 2K "blocks" */
  (UINT64_C (1) << 63) - 9000,
  UINT64_MAX - WINDOW + 1,      /* the very last entries */
};

static unsigned char model[NR_WINDOWS][WINDOW];

static void
check (const struct statemap *map)
{
  unsigned w;
  uint64_t j;

  for (w = 0; w < NR_WINDOWS; ++w) {
    for (j = 0; j < WINDOW; ++j)
      if (statemap_get (map, window_start[w] + j) != model[w][j]) {
        fprintf (stderr, "get: window %u entry %" PRIu64 " wrong\n", w, j);
        exit (EXIT_FAILURE);
      }
    /* Walk the window by runs and compare each run with the model. */
    for (j = 0; j < WINDOW; ) {
      unsigned state;
      uint64_t end = statemap_run (map, window_start[w] + j,
                                   window_start[w] + WINDOW - 1, &state);
      uint64_t k, stop = end - window_start[w];

      if (stop <= j || state != model[w][j]) {
        fprintf (stderr, "run: window %u entry %" PRIu64 " bad run\n", w, j);
        exit (EXIT_FAILURE);
      }
      for (k = j; k < stop; ++k)
        if (model[w][k] != state) {
          fprintf (stderr, "run: window %u entry %" PRIu64 " inside a run "
                   "of another state\n", w, k);
          exit (EXIT_FAILURE);
        }
      if (stop < WINDOW - 1 && model[w][stop] == state) {
        fprintf (stderr, "run: window %u run ends early at %" PRIu64 "\n",
                 w, stop);
        exit (EXIT_FAILURE);
      }
      j = stop == WINDOW - 1 ? WINDOW : stop;
    }
  }
}

/* Exports every window, compares the packing with the model, then
 * imports the packings into a fresh map, which must then pass check.
 * The last 4 entries of each window stay out: i + n may not wrap, and
 * the last window ends at the top of the index space.
 */
#define PACKED (WINDOW - 4)
static void
check_export_import (const struct statemap *map)
{
  static uint8_t packed[NR_WINDOWS][PACKED / 4];
  struct statemap copy = STATEMAP_INIT;
  unsigned w;
  uint64_t j;

  for (w = 0; w < NR_WINDOWS; ++w) {
    statemap_export (map, window_start[w], PACKED, packed[w]);
    for (j = 0; j < PACKED; ++j)
      if (((packed[w][j / 4] >> (2 * (j % 4))) & 3) != model[w][j]) {
        fprintf (stderr, "export: window %u entry %" PRIu64 " wrong\n", w, j);
        exit (EXIT_FAILURE);
      }
  }
  /* Import over a map that holds other states, so zeros must clear. */
  for (w = 0; w < NR_WINDOWS; ++w) {
    if (statemap_reserve (&copy, window_start[w], WINDOW) == -1) {
      perror ("statemap_reserve");
      exit (EXIT_FAILURE);
    }
    statemap_set (&copy, window_start[w], WINDOW, 3);
    if (statemap_import (&copy, window_start[w], PACKED, packed[w]) == -1) {
      perror ("statemap_import");
      exit (EXIT_FAILURE);
    }
    for (j = PACKED; j < WINDOW; ++j)
      statemap_set (&copy, window_start[w] + j, 1, model[w][j]);
  }
  check (&copy);
  statemap_free (&copy);
}

int
main (void)
{
  struct statemap map = STATEMAP_INIT;
  unsigned r, state;
  uint64_t end;

  srand (1);

  /* Empty maps of any range answer 0 and hold no memory. */
  end = statemap_run (&map, 5, UINT64_MAX, &state);
  if (end != UINT64_MAX || state != 0 || map.bytes != 0) {
    fprintf (stderr, "empty map misbehaves\n");
    exit (EXIT_FAILURE);
  }

  for (r = 0; r < ROUNDS; ++r) {
    unsigned w = rand () % NR_WINDOWS;
    uint64_t i = rand () % WINDOW;
    uint64_t n = 1 + rand () % (rand () % 4 == 0 ? WINDOW - i : 70);
    unsigned s = rand () % 4;
    uint64_t k;

    if (n > WINDOW - i)
      n = WINDOW - i;
    if (s != 0 && statemap_reserve (&map, window_start[w] + i, n) == -1) {
      perror ("statemap_reserve");
      exit (EXIT_FAILURE);
    }
    statemap_set (&map, window_start[w] + i, n, s);
    for (k = i; k < i + n; ++k)
      model[w][k] = s;
    if (r % 1000 == 0)
      check (&map);
  }
  check (&map);
  check_export_import (&map);

  /* Memory follows what was touched: five windows of 20000 entries
   * need a handful of 1 KiB leaves and a few nodes per level, far from
   * anything proportional to the 2^64 range.
   */
  if (map.bytes > 256 * 1024) {
    fprintf (stderr, "map holds %zu bytes for %d entries\n",
             map.bytes, NR_WINDOWS * WINDOW);
    exit (EXIT_FAILURE);
  }
  /* Clearing a huge range skips the holes rather than walking them. */
  statemap_set (&map, 0, UINT64_MAX, 0);
  if (statemap_run (&map, 0, UINT64_MAX, &state) != UINT64_MAX || state != 0) {
    fprintf (stderr, "clearing everything left a non-zero entry\n");
    exit (EXIT_FAILURE);
  }

  statemap_free (&map);
  if (map.bytes != 0 || statemap_get (&map, 0) != 0) {
    fprintf (stderr, "free left something behind\n");
    exit (EXIT_FAILURE);
  }
  return EXIT_SUCCESS;
}
