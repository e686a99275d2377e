/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* A budget of bytes that many threads take from and give back to
 * without a lock: the disk space an overlay may use (cow-max-size).
 * A take that would pass the limit fails and changes nothing, so the
 * bytes taken never exceed it, however many threads race.
 */

#ifndef COMMON_SPACECAP_H
#define COMMON_SPACECAP_H

#include <stdbool.h>
#include <stdint.h>

struct spacecap {
  uint64_t limit;               /* UINT64_MAX: no limit */
  uint64_t used;                /* atomic */
};

#define SPACECAP_NO_LIMIT UINT64_MAX

extern void spacecap_init (struct spacecap *cap, uint64_t limit);

/* Takes bytes if used + bytes stays within the limit.  Returns whether
 * it did.
 */
extern bool spacecap_take (struct spacecap *cap, uint64_t bytes);

/* Takes bytes if used + bytes + keep stays within the limit: a take
 * that leaves keep bytes to the others.  Returns whether it did.
 */
extern bool spacecap_take_leaving (struct spacecap *cap, uint64_t bytes,
                                   uint64_t keep);

/* Takes bytes whatever the limit: what a kept overlay already holds
 * when it is opened.
 */
extern void spacecap_charge (struct spacecap *cap, uint64_t bytes);

/* Gives back bytes taken before. */
extern void spacecap_give (struct spacecap *cap, uint64_t bytes);

extern uint64_t spacecap_used (const struct spacecap *cap);

#endif /* COMMON_SPACECAP_H */
