/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of nbdkitargs.h: --tls=require and --tls require, -U PATH
 * in its forms, read as nbdkit reads them, the last one winning;
 * values of other options, short option clusters, and the plugin's
 * own arguments are not mistaken for them, and nbdkit run by another
 * program is found.
 */

#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nbdkitargs.h"

static int failed;

/* Fills buf with args, the arguments separated by spaces, each ended
 * by a 0 byte.  Returns the length.
 */
static size_t
split (char *buf, const char *args)
{
  size_t n = strlen (args) + 1;

  memcpy (buf, args, n);
  for (char *p = buf; *p; ++p)
    if (*p == ' ')
      *p = '\0';
  return n;
}

static void
expect_tls (const char *args, bool want)
{
  char buf[256];
  size_t n = split (buf, args);

  if (nbdkitargs_tls_required_in (buf, n) != want) {
    fprintf (stderr, "test-nbdkitargs: \"%s\": expected TLS %s\n", args,
             want ? "required" : "not required");
    failed = 1;
  }
}

/* want: the socket's path, or NULL for none. */
static void
expect_unix (const char *args, const char *want)
{
  char buf[256];
  size_t n = split (buf, args);
  const char *got = nbdkitargs_value_in (buf, n, "unix", 'U');

  if ((got == NULL) != (want == NULL) ||
      (got && strcmp (got, want) != 0)) {
    fprintf (stderr, "test-nbdkitargs: \"%s\": expected socket %s, got %s\n",
             args, want ? want : "none", got ? got : "none");
    failed = 1;
  }
}

int
main (void)
{
  expect_tls ("nbdkit --tls=require file disk", true);
  expect_tls ("nbdkit --tls require file disk", true);
  expect_tls ("nbdkit -f --tls=on file disk", false);
  expect_tls ("nbdkit --tls=off file disk", false);
  expect_tls ("nbdkit file disk", false);
  expect_tls ("nbdkit --tls=require --tls=on file disk", false);
  expect_tls ("nbdkit --tls=on --tls require -U sock file disk", true);
  /* Values of other options. */
  expect_tls ("nbdkit -U --tls=require file disk", false);
  expect_tls ("nbdkit --filter --tls=require file disk", false);
  expect_tls ("nbdkit -fU --tls=require file disk", false);
  expect_tls ("nbdkit -U/tmp/s --tls=require file disk", true);
  expect_tls ("nbdkit --run --tls=require file disk", false);
  expect_tls ("nbdkit --tls-psk=--tls=require file disk", false);
  /* The plugin's arguments, and after "--". */
  expect_tls ("nbdkit file --tls=require", false);
  expect_tls ("nbdkit -- --tls=require", false);
  expect_tls ("nbdkit --tls", false);
  expect_tls ("", false);
  /* nbdkit run by another program. */
  expect_tls ("/lib64/ld.so --preload /x/libtsan.so /usr/sbin/nbdkit "
              "--tls=require file disk", true);
  expect_tls ("valgrind --quiet /usr/sbin/nbdkit -f --tls require file d",
              true);
  expect_tls ("/lib64/ld.so --preload /x/libtsan.so /usr/sbin/nbdkit "
              "--tls=on file disk", false);

  expect_unix ("nbdkit -U /tmp/s file disk", "/tmp/s");
  expect_unix ("nbdkit -U/tmp/s file disk", "/tmp/s");
  expect_unix ("nbdkit -fU /tmp/s file disk", "/tmp/s");
  expect_unix ("nbdkit -fU/tmp/s file disk", "/tmp/s");
  expect_unix ("nbdkit --unix=/tmp/s file disk", "/tmp/s");
  expect_unix ("nbdkit --unix /tmp/s file disk", "/tmp/s");
  expect_unix ("nbdkit -U /tmp/a -U b file disk", "b");
  expect_unix ("nbdkit -U - file disk", "-");
  expect_unix ("nbdkit -p 10809 file disk", NULL);
  expect_unix ("nbdkit -PU file disk", NULL);
  expect_unix ("nbdkit --pidfile -U file disk", NULL);
  expect_unix ("nbdkit -D -U file disk", NULL);
  expect_unix ("nbdkit file -U s", NULL);
  expect_unix ("nbdkit -U", NULL);
  expect_unix ("valgrind /usr/sbin/nbdkit -fv -U s file disk", "s");
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
