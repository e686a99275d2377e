/* Unit test of monotonic.h: it never goes back, and it advances by at
 * least the time slept, in nanoseconds.
 */

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "monotonic.h"

int
main (void)
{
  const struct timespec ten_ms = { .tv_sec = 0, .tv_nsec = 10000000 };
  uint64_t before, after;
  unsigned i;

  before = monotonic_ns ();
  for (i = 0; i < 100000; ++i) {
    after = monotonic_ns ();
    if (after < before) {
      fprintf (stderr, "test-monotonic: went back from %llu to %llu\n",
               (unsigned long long) before, (unsigned long long) after);
      return EXIT_FAILURE;
    }
    before = after;
  }
  nanosleep (&ten_ms, NULL);
  after = monotonic_ns ();
  if (after - before < 10000000) {
    fprintf (stderr, "test-monotonic: 10 ms sleep measured as %llu ns\n",
             (unsigned long long) (after - before));
    return EXIT_FAILURE;
  }
  return EXIT_SUCCESS;
}
