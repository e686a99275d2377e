/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* C strings written as JSON strings (json.h). */

#include <config.h>

#include <stdint.h>
#include <stdio.h>

#include "json.h"

/* The length of the valid UTF-8 sequence of more than one byte at s,
 * or 0 if s does not start one.
 */
static unsigned
utf8_sequence (const unsigned char *s)
{
  static const uint32_t min[5] = { 0, 0, 0x80, 0x800, 0x10000 };
  unsigned len, i;
  uint32_t cp;

  if (s[0] >= 0xc0 && s[0] <= 0xdf) { len = 2; cp = s[0] & 0x1f; }
  else if (s[0] >= 0xe0 && s[0] <= 0xef) { len = 3; cp = s[0] & 0x0f; }
  else if (s[0] >= 0xf0 && s[0] <= 0xf7) { len = 4; cp = s[0] & 0x07; }
  else
    return 0;
  for (i = 1; i < len; ++i) {
    if ((s[i] & 0xc0) != 0x80)  /* also stops at the terminating NUL */
      return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
    return 0;
  return len;
}

int
json_write_string (FILE *fp, const char *str)
{
  const unsigned char *s = (const unsigned char *) str;

  putc ('"', fp);
  while (*s) {
    unsigned len;

    if (*s == '"' || *s == '\\') {
      putc ('\\', fp);
      putc (*s++, fp);
    }
    else if (*s >= 0x20 && *s < 0x7f)
      putc (*s++, fp);
    else if ((len = utf8_sequence (s)) > 0) {
      fwrite (s, 1, len, fp);
      s += len;
    }
    else
      fprintf (fp, "\\u%04x", *s++);
  }
  putc ('"', fp);
  return ferror (fp) ? -1 : 0;
}
