/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The thread that ends overlays whose clients have left, under
 * cow-lifetime=clients: it calls back whoever keeps the overlays when
 * woken, and again at the time that callback says the next one is
 * due.  It knows nothing of overlays.
 */

#ifndef COW_LIFETIME_H
#define COW_LIFETIME_H

#include <stdint.h>

/* Ends the overlays due at now (monotonic nanoseconds) and returns
 * when the next is due, or UINT64_MAX if none is.
 */
typedef uint64_t lifetime_end_due (uint64_t now);

/* Starts the thread (after nbdkit has forked).  Returns 0, or -1
 * after nbdkit_error.
 */
extern int lifetime_start (lifetime_end_due *end_due);

/* Makes the thread call end_due again now: an overlay's last client
 * has left, or a reader of one let it go.  Does nothing if the thread
 * does not run.
 */
extern void lifetime_wake (void);

/* Stops the thread, if it runs, and waits for it. */
extern void lifetime_stop (void);

#endif /* COW_LIFETIME_H */
