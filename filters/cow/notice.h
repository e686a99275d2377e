/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The filter's messages that are not plain errors.
 *
 * A notice tells the user that the filter does something other than
 * asked, which is no error (a shared plugin handle it cannot share).
 * nbdkit has no call for one: nbdkit_error says "error:".  So a notice
 * goes where nbdkit's own messages go, stderr, or syslog once nbdkit
 * runs in the background (its stderr then leads nowhere), and to the
 * debug log.
 *
 * A refused export is said once per connection.  A client asking for
 * an export's details and then for the export (nbdinfo, qemu) opens
 * it twice in one connection, and should read why once: the first
 * refusal is noted for the connection, and the connection's next
 * open of the same name is refused at once, quietly.
 */

#ifndef COW_NOTICE_H
#define COW_NOTICE_H

#include <stdbool.h>

extern void notice (const char *fmt, ...)
  __attribute__ ((format (printf, 1, 2)));

/* The connection refused exportname after saying why. */
extern void refusal_note (const char *exportname);

/* Whether the connection refused exportname last time it opened it;
 * the note is then forgotten.
 */
extern bool refusal_repeated (const char *exportname);

#endif /* COW_NOTICE_H */
