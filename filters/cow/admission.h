/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the
 * licence.
 */

/* Admission under cow-max-exports=N: at most N overlays at once, one
 * of them kept for the default export's, so that a client sending
 * names cannot exhaust the server.  Past that a new name is refused,
 * the first refusal logged as an error and every one counted (the
 * default export and the names already open are still served).
 */

#ifndef COW_ADMISSION_H
#define COW_ADMISSION_H

#include <stdbool.h>
#include <stdint.h>

#include "overlay.h"

/* Whether an overlay of name, which has none yet, has a place. */
extern bool admission_has_place (const char *name) REQUIRES (overlays_lock);

/* Counts and logs the refusal of a name that has no place. */
extern void admission_refuse (void) REQUIRES (overlays_lock);

/* o, new, takes its place: named unless it is the default export's. */
extern void admission_admit (struct overlay *o) REQUIRES (overlays_lock);

/* o, ending, gives its place back. */
extern void admission_leave (const struct overlay *o)
  REQUIRES (overlays_lock);

/* The opens of new names refused so far. */
extern uint64_t admission_refused (void) REQUIRES (overlays_lock);

#endif /* COW_ADMISSION_H */
