/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Unit test of json.h: plain names, escapes, valid UTF-8 kept, and
 * every kind of invalid UTF-8 escaped byte by byte.
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

static int failures;

static void
check (const char *in, const char *want)
{
  char *out = NULL;
  size_t size = 0;
  FILE *fp = open_memstream (&out, &size);

  if (fp == NULL || json_write_string (fp, in) == -1 || fclose (fp) != 0) {
    perror ("test-json");
    exit (EXIT_FAILURE);
  }
  if (strcmp (out, want) != 0) {
    fprintf (stderr, "test-json: wrote %s, want %s\n", out, want);
    failures++;
  }
  free (out);
}

int
main (void)
{
  check ("", "\"\"");
  check ("disk-1_a.img", "\"disk-1_a.img\"");
  check ("../x/\"q\"\\", "\"../x/\\\"q\\\"\\\\\"");
  check ("a\nb\tc\x1f\x7f", "\"a\\u000ab\\u0009c\\u001f\\u007f\"");
  /* Valid UTF-8 of 2, 3 and 4 bytes passes through. */
  check ("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xbe",
         "\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x92\xbe\"");
  /* Invalid: a stray continuation, a lone lead byte, a lead byte cut
   * short by the end, an overlong '/', a surrogate, past U+10FFFF,
   * and 0xff.
   */
  check ("\x80", "\"\\u0080\"");
  check ("\xc3x", "\"\\u00c3x\"");
  check ("\xe2\x82", "\"\\u00e2\\u0082\"");
  check ("\xc0\xaf", "\"\\u00c0\\u00af\"");
  check ("\xed\xa0\x80", "\"\\u00ed\\u00a0\\u0080\"");
  check ("\xf4\x90\x80\x80", "\"\\u00f4\\u0090\\u0080\\u0080\"");
  check ("\xff/.", "\"\\u00ff/.\"");
  return failures ? EXIT_FAILURE : EXIT_SUCCESS;
}
