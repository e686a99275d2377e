/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of basemap.h over a fake base: a block is zero only where
 * a zero run covers all of it (the short last block up to the size),
 * the base is asked once per window and again only where it could not
 * tell, and threads asking at once all get the base's answer.
 */

#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "basemap.h"

#define SHIFT 16                        /* 64K blocks */
#define BLOCK (UINT64_C (1) << SHIFT)
#define SIZE (3 * (uint64_t) BASEMAP_WINDOW + 1000)   /* short last block */
#define LAST ((SIZE - 1) >> SHIFT)

struct run {
  uint64_t offset, length;
  bool zero;
};

/* The fake base: its runs in order, covering [0, SIZE). */
struct fake {
  const struct run *runs;
  unsigned nr_runs;
  bool fails;                   /* describe cannot tell */
  unsigned calls;               /* of describe */
  uint64_t asked_offset, asked_count;   /* the last call's */
};

static void
check (int ok, const char *what)
{
  if (!ok) {
    fprintf (stderr, "test-basemap: %s\n", what);
    exit (EXIT_FAILURE);
  }
}

static int
fake_pread (void *opaque, void *buf, uint32_t count, uint64_t offset,
            int *err)
{
  (void) opaque, (void) buf, (void) count, (void) offset;
  *err = EIO;
  return -1;
}

/* Reports the runs meeting [offset, offset+count), clipped to it, as
 * nbdkit's extents do.
 */
static int
fake_describe (void *opaque, uint32_t count, uint64_t offset,
               blk_found_run *found, void *found_opaque)
{
  struct fake *f = opaque;
  uint64_t end = offset + count;
  unsigned i;

  __atomic_add_fetch (&f->calls, 1, __ATOMIC_RELAXED);
  __atomic_store_n (&f->asked_offset, offset, __ATOMIC_RELAXED);
  __atomic_store_n (&f->asked_count, count, __ATOMIC_RELAXED);
  if (f->fails)
    return -1;
  for (i = 0; i < f->nr_runs; ++i) {
    const struct run *r = &f->runs[i];
    uint64_t from = r->offset > offset ? r->offset : offset;
    uint64_t to = r->offset + r->length < end ? r->offset + r->length : end;
    if (from < to)
      found (found_opaque, from, to - from, r->zero);
  }
  return 0;
}

static struct blk_base
base_of (struct fake *f)
{
  return (struct blk_base) { .pread = fake_pread, .describe = fake_describe,
                             .opaque = f };
}

static bool
zeros (struct basemap *map, struct fake *f, uint64_t b)
{
  struct blk_base base = base_of (f);

  return basemap_reads_zeros (map, &base, b);
}

/* The disk, and where the waits for the map's lock count. */
static const struct blockgeom geom = { .shift = SHIFT, .size = SIZE };
static struct lockwaits waits;

static void
new_map (struct basemap *map)
{
  basemap_init (map, &geom, &waits);
}

/* Zero runs that end or start inside a block leave it data. */
static void
test_partial_blocks (void)
{
  const struct run runs[] = {
    { 0, BLOCK + 512, true },                   /* block 0 and part of 1 */
    { BLOCK + 512, 512, false },
    { BLOCK + 1024, 3 * BLOCK - 1024, true },   /* rest of 1, 2, 3 */
    { 4 * BLOCK, SIZE - 4 * BLOCK, false },
  };
  struct fake f = { .runs = runs, .nr_runs = 4 };
  struct basemap map;

  new_map (&map);
  check (zeros (&map, &f, 0), "a whole zero block reads as data");
  check (f.asked_offset == 0 && f.asked_count == BASEMAP_WINDOW,
         "the first question is not about its window");
  check (!zeros (&map, &f, 1), "a block with data in it reads as zeros");
  check (zeros (&map, &f, 2) && zeros (&map, &f, 3),
         "whole blocks of a zero run read as data");
  check (!zeros (&map, &f, 4), "a data block reads as zeros");
  check (f.calls == 1, "a window is asked about twice");
  basemap_free (&map);
}

/* The short last block is zero if a zero run reaches the size. */
static void
test_short_last_block (void)
{
  const struct run runs[] = {
    { 0, LAST * BLOCK, false },
    { LAST * BLOCK, SIZE - LAST * BLOCK, true },
  };
  struct fake f = { .runs = runs, .nr_runs = 2 };
  struct basemap map;

  new_map (&map);
  check (zeros (&map, &f, LAST), "the short last block reads as data");
  check (f.asked_offset == LAST * BLOCK && f.asked_count == SIZE - LAST * BLOCK,
         "the last window does not stop at the size");
  check (!zeros (&map, &f, LAST - 1), "the block before it reads as zeros");
  check (f.calls == 2, "the block before it was not asked about");
  basemap_free (&map);
}

/* A base that cannot tell reads as data and is asked again; a base
 * without describe is never asked.
 */
static void
test_no_answer (void)
{
  const struct run runs[] = { { 0, SIZE, true } };
  struct fake f = { .runs = runs, .nr_runs = 1, .fails = true };
  struct blk_base no_describe = { .pread = fake_pread, .opaque = &f };
  struct basemap map;

  new_map (&map);
  check (!zeros (&map, &f, 5), "a failed describe reads as zeros");
  check (!basemap_reads_zeros (&map, &no_describe, 5),
         "a base without describe reads as zeros");
  check (f.calls == 1, "a base without describe was asked");
  f.fails = false;
  check (zeros (&map, &f, 5), "a failed describe was remembered");
  check (f.calls == 2, "the base was not asked again");
  basemap_free (&map);
}

/* A base that reports only a prefix of the window: the blocks past it
 * stay unknown and are asked about in a window of their own.
 */
static void
test_prefix_only (void)
{
  const struct run runs[] = { { 0, 8 * BLOCK, true } };
  struct fake f = { .runs = runs, .nr_runs = 1 };
  struct basemap map;

  new_map (&map);
  check (zeros (&map, &f, 7), "a block of the prefix reads as data");
  check (!zeros (&map, &f, 8), "a block past the prefix reads as zeros");
  check (f.calls == 2 && f.asked_offset == 8 * BLOCK,
         "a block past the prefix was not asked about from itself");
  basemap_free (&map);
}

/* Threads asking about every block at once: data in the second
 * window, zeros elsewhere, whatever the order.
 */
#define THREADS 4
static const struct run striped[] = {
  { 0, BASEMAP_WINDOW, true },
  { BASEMAP_WINDOW, BASEMAP_WINDOW, false },
  { 2 * (uint64_t) BASEMAP_WINDOW, SIZE - 2 * (uint64_t) BASEMAP_WINDOW, true },
};
static struct fake shared = { .runs = striped, .nr_runs = 3 };
static struct basemap shared_map;
static unsigned long wrong;

static void *
asker (void *arg)
{
  unsigned seed = (unsigned) (uintptr_t) arg, k;
  struct blk_base base = base_of (&shared);

  for (k = 0; k < 20000; ++k) {
    uint64_t b = rand_r (&seed) % (LAST + 1);
    bool expect = (b << SHIFT) / BASEMAP_WINDOW != 1;
    if (basemap_reads_zeros (&shared_map, &base, b) != expect)
      __atomic_fetch_add (&wrong, 1, __ATOMIC_RELAXED);
  }
  return NULL;
}

static void
test_threads (void)
{
  pthread_t threads[THREADS];
  uintptr_t i;

  new_map (&shared_map);
  for (i = 0; i < THREADS; ++i)
    check (pthread_create (&threads[i], NULL, asker, (void *) (i + 1)) == 0,
           "pthread_create");
  for (i = 0; i < THREADS; ++i)
    pthread_join (threads[i], NULL);
  check (wrong == 0, "a thread got a wrong answer");
  basemap_free (&shared_map);
}

int
main (void)
{
  check (lockwaits_init (&waits, BLK_LOCKS) == 0, "lockwaits_init failed");
  test_partial_blocks ();
  test_short_last_block ();
  test_no_answer ();
  test_prefix_only ();
  test_threads ();
  lockwaits_free (&waits);
  return EXIT_SUCCESS;
}
