/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Preloaded into nbdkit by ./nbdkit under ASan and valgrind: spares the
 * leak check at exit a scan of the global data no one ever touched.
 * nbdkit 1.32 has 192 MiB of zeroed global data (.bss), and both leak
 * checkers read all of it at every exit, one page fault a page: about
 * 1.5 s of CPU per nbdkit, on a paravirtualized kernel.  A page never
 * touched is not in memory and holds zeros, so no pointer: leaving it
 * out changes nothing the check finds.
 *
 * ./nbdkit tells LeakSanitizer, for nbdkit alone, neither to scan
 * global data itself (use_globals=0) nor to check at exit
 * (leak_check_at_exit=0): an exit handler of this file looks at every
 * writable segment of every loaded object with mincore, registers the
 * pages in memory as roots and then runs the check.  The runtime's own
 * segments are left out, as LeakSanitizer leaves out its allocator's,
 * so that nothing can only seem reachable.  The loader's records of the
 * objects loaded at start are roots too: the loader made them before
 * the sanitizer's allocator existed, in memory no scan reads, and what
 * they point to (the list of objects dlopen made global) would be
 * reported as leaked, each report a costly symbolization of the runtime
 * to match it with a suppression.  Under memcheck the handler
 * marks long runs of pages not in memory unaddressable, which its scan
 * skips.  Anywhere else this does nothing.
 */

#define _GNU_SOURCE

#include <dlfcn.h>
#include <link.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined __has_include
#if __has_include (<valgrind/memcheck.h>)
#include <valgrind/memcheck.h>
#endif
#endif

extern void __lsan_register_root_region (const void *p, size_t size)
  __attribute__ ((weak));
extern void __lsan_do_leak_check (void) __attribute__ ((weak));
extern int __sanitizer_get_ownership (const volatile void *p)
  __attribute__ ((weak));

static uintptr_t page_size;

/* Gives take each run of [begin, end) whose pages are in memory
 * (in = 1) or not (in = 0), and which spans at least min bytes.
 */
static void
each_run (uintptr_t begin, uintptr_t end, int in, uintptr_t min,
          void (*take) (uintptr_t begin, uintptr_t end))
{
  uintptr_t first_page = begin & ~(page_size - 1);
  size_t pages = (end - first_page + page_size - 1) / page_size, i = 0, run;
  unsigned char *vec = malloc (pages);

  if (vec == NULL || mincore ((void *) first_page, pages * page_size,
                              vec) == -1) {
    free (vec);
    if (in)
      take (begin, end);        /* cannot tell: all of it is a root */
    return;
  }
  while (i < pages) {
    uintptr_t from, to;

    while (i < pages && (vec[i] & 1) != in)
      ++i;
    run = i;
    while (i < pages && (vec[i] & 1) == in)
      ++i;
    from = first_page + run * page_size;
    to = first_page + i * page_size;
    if (from < begin)
      from = begin;
    if (to > end)
      to = end;
    if (to > from && to - from >= min)
      take (from, to);
  }
  free (vec);
}

static void
lsan_root (uintptr_t begin, uintptr_t end)
{
  __lsan_register_root_region ((const void *) begin, end - begin);
}

#ifdef VALGRIND_MAKE_MEM_NOACCESS
/* Under memcheck only runs this long are marked, so that an exit
 * handler or destructor that reads some small static of its own never
 * touched (which memcheck would then call an invalid read) meets none.
 */
#define MEMCHECK_MIN (1u << 20)

static void
memcheck_skip (uintptr_t begin, uintptr_t end)
{
  VALGRIND_MAKE_MEM_NOACCESS ((void *) begin, end - begin);
}
#endif

/* The loaded object holding the leak checker's runtime, if any. */
static uintptr_t runtime_base;

static int
each_object (struct dl_phdr_info *info, size_t size, void *unused)
{
  int i;

  (void) size;
  (void) unused;
  if (__lsan_do_leak_check && info->dlpi_addr == runtime_base)
    return 0;
  for (i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t begin = info->dlpi_addr + ph->p_vaddr;
    uintptr_t end = begin + ph->p_memsz;

    if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) == 0)
      continue;
    if (__lsan_do_leak_check)
      each_run (begin, end, 1, 0, lsan_root);
#ifdef VALGRIND_MAKE_MEM_NOACCESS
    else
      each_run (begin, end, 0, MEMCHECK_MIN, memcheck_skip);
#endif
  }
  return 0;
}

/* More than the loader's record of an object (struct link_map) takes,
 * in the C libraries this runs with.
 */
#define LINK_MAP_SPAN 2048

/* Registers as roots the records of loaded objects that the loader did
 * not get from the sanitizer's allocator, each to the end of its page
 * at most, so that no other mapping is scanned.
 */
static void
loader_roots (void)
{
  const struct link_map *map;

  if (__sanitizer_get_ownership == NULL)
    return;
  for (map = _r_debug.r_map; map != NULL; map = map->l_next) {
    uintptr_t begin = (uintptr_t) map;
    uintptr_t end = (begin | (page_size - 1)) + 1;

    if (__sanitizer_get_ownership (map))
      continue;
    if (end - begin > LINK_MAP_SPAN)
      end = begin + LINK_MAP_SPAN;
    lsan_root (begin, end);
  }
}

static void
spare_untouched (void)
{
  dl_iterate_phdr (each_object, NULL);
  if (__lsan_do_leak_check) {
    loader_roots ();
    __lsan_do_leak_check ();
  }
}

/* ./nbdkit keeps LSAN_OPTIONS as it found it in EXIT_ROOTS_LSAN_OPTIONS
 * before it adds its two options.  LeakSanitizer has read them by
 * now, so LSAN_OPTIONS is put back: what nbdkit runs (a --run command,
 * an instrumented client among them) must scan its globals itself.
 */
static void
restore_lsan_options (const char *was)
{
  if (*was)
    setenv ("LSAN_OPTIONS", was, 1);
  else
    unsetenv ("LSAN_OPTIONS");
  unsetenv ("EXIT_ROOTS_LSAN_OPTIONS");
}

/* Stops nbdkit where ./nbdkit turned LeakSanitizer's own check off but
 * this file cannot run it: nbdkit would otherwise go unchecked.
 */
static void
no_leak_check (const char *why)
{
  fprintf (stderr, "exit-roots: %s: no leak check\n", why);
  abort ();
}

static void __attribute__ ((constructor))
exit_roots (void)
{
  const char *was = getenv ("EXIT_ROOTS_LSAN_OPTIONS");
  bool check_is_ours = was != NULL;
  Dl_info runtime;

  page_size = sysconf (_SC_PAGESIZE);
  if (check_is_ours)
    restore_lsan_options (was);
  if (__lsan_register_root_region && __lsan_do_leak_check) {
    if (dladdr ((void *) __lsan_register_root_region, &runtime) == 0)
      no_leak_check ("the sanitizer runtime is not found");
    runtime_base = (uintptr_t) runtime.dli_fbase;
    atexit (spare_untouched);
  }
  else if (check_is_ours)
    no_leak_check ("the sanitizer runtime lacks __lsan_do_leak_check");
#ifdef VALGRIND_MAKE_MEM_NOACCESS
  else if (RUNNING_ON_VALGRIND)
    atexit (spare_untouched);
#endif
}
