/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* Writing a C string as a JSON string.
 *
 * Export names are client input: any bytes but NUL.  JSON strings are
 * Unicode, so valid UTF-8 passes through (the NBD protocol asks for
 * UTF-8 names), '"', '\' and control characters are escaped, and every
 * byte that is not part of valid UTF-8 (stray continuation bytes,
 * overlong forms, surrogates, code points past U+10FFFF) is written as
 * \u00XX, the character with the byte's number: the output is always
 * valid JSON, and a name that was UTF-8 reads back unchanged.
 */

#ifndef COMMON_JSON_H
#define COMMON_JSON_H

#include <stdio.h>

/* Writes s as a JSON string, quotes included.  Returns 0, or -1 with
 * errno set if the stream failed.
 */
extern int json_write_string (FILE *fp, const char *s);

#endif /* COMMON_JSON_H */
