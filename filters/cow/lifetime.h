/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the
 * licence.
 */

/* When an overlay ends.  By default, at nbdkit's exit; under
 * cow-lifetime=clients, once its last connection has closed and the
 * grace has passed with none opening it again (a throw-away overlay is
 * then discarded, a kept one closed cleanly, to be opened again by the
 * next client of its name), by a thread of its own.  Whatever the
 * lifetime, an overlay that served no connection ends with its last,
 * so that a refused name keeps nothing: no place under
 * cow-max-exports, descriptor, lock or space.  No overlay ends while a
 * statistics walk reads it (pinned).
 */

#ifndef COW_LIFETIME_H
#define COW_LIFETIME_H

#include <stdbool.h>
#include <stdint.h>

#include "overlay.h"

/* Starts the thread under cow-lifetime=clients (after nbdkit has
 * forked).  Returns 0, or -1 after nbdkit_error.
 */
extern int lifetime_start (void);

/* Stops the thread, if it runs, and waits for it. */
extern void lifetime_stop (void);

/* A connection of o has closed (o->connections counts it no more):
 * the last starts o's grace.  Returns whether o must end now, marked
 * ending: the caller calls lifetime_end once it has let the lock go.
 */
extern bool lifetime_closed (struct overlay *o) REQUIRES (overlays_lock);

/* Called when a new name finds no place under cow-max-exports:
 * frees one that comes free by deadline (monotonic_ns), ending an
 * overlay past its grace in this thread, or waiting a little for one
 * that ends, or whose grace could end, by then.  Lets go of the lock
 * meanwhile.  Returns whether the caller should look again, false once
 * no place can come free by deadline.
 */
extern bool lifetime_make_place (uint64_t deadline) REQUIRES (overlays_lock);

/* Keeps o from ending while it is read, and lets it end again;
 * lifetime_unpin returns as lifetime_closed does.
 */
extern void lifetime_pin (struct overlay *o) REQUIRES (overlays_lock);
extern bool lifetime_unpin (struct overlay *o) REQUIRES (overlays_lock);

/* Ends o, marked ending, which no one else touches now: frees its
 * block layer (a throw-away one's space given back, a kept one flushed
 * and closed cleanly) and the plugin contexts it shared, then takes it
 * off the list, waking the clients waiting to open its name.
 */
extern void lifetime_end (struct overlay *o);

/* The overlays ended so far, throw-away and kept. */
extern void lifetime_ended (uint64_t *discarded, uint64_t *closed)
  REQUIRES (overlays_lock);

#endif /* COW_LIFETIME_H */
