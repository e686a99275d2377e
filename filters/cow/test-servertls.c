/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* Unit test of servertls.h: --tls=require and --tls require read as
 * nbdkit reads them, the last one winning; values of other options,
 * short option clusters, and the plugin's own arguments are not
 * mistaken for the mode, and nbdkit run by another program is found.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "servertls.h"

static int failed;

/* args: the arguments separated by spaces. */
static void
expect (const char *args, bool want)
{
  char buf[256];
  size_t n = strlen (args) + 1;

  memcpy (buf, args, n);
  for (char *p = buf; *p; ++p)
    if (*p == ' ')
      *p = '\0';
  if (servertls_required_in (buf, n) != want) {
    fprintf (stderr, "test-servertls: \"%s\": expected %s\n", args,
             want ? "required" : "not required");
    failed = 1;
  }
}

int
main (void)
{
  expect ("nbdkit --tls=require file disk", true);
  expect ("nbdkit --tls require file disk", true);
  expect ("nbdkit -f --tls=on file disk", false);
  expect ("nbdkit --tls=off file disk", false);
  expect ("nbdkit file disk", false);
  expect ("nbdkit --tls=require --tls=on file disk", false);
  expect ("nbdkit --tls=on --tls require -U sock file disk", true);
  /* Values of other options. */
  expect ("nbdkit -U --tls=require file disk", false);
  expect ("nbdkit --filter --tls=require file disk", false);
  expect ("nbdkit -fU --tls=require file disk", false);
  expect ("nbdkit -U/tmp/s --tls=require file disk", true);
  expect ("nbdkit --run --tls=require file disk", false);
  /* The plugin's arguments, and after "--". */
  expect ("nbdkit file --tls=require", false);
  expect ("nbdkit -- --tls=require", false);
  expect ("nbdkit --tls", false);
  expect ("", false);
  /* nbdkit run by another program. */
  expect ("/lib64/ld.so --preload /x/libtsan.so /usr/sbin/nbdkit "
          "--tls=require file disk", true);
  expect ("valgrind --quiet /usr/sbin/nbdkit -f --tls require file d", true);
  expect ("/lib64/ld.so --preload /x/libtsan.so /usr/sbin/nbdkit "
          "--tls=on file disk", false);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
