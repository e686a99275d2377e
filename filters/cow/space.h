/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The space cap (cow-max-size; docs/design.md, "The space cap"): the
 * disk space of every overlay of the server, counted together against
 * one limit, lock-free.  The block
 * layer takes a block's space before the I/O that moves it into
 * BLK_ALLOCATED and gives it back when it leaves it or the I/O fails;
 * a request that cannot have it fails with ENOSPC having changed
 * nothing.  Every call may run beside any other.
 */

#ifndef COW_SPACE_H
#define COW_SPACE_H

#include <stdbool.h>
#include <stdint.h>

#include "spacecap.h"

/* A block is charged its bytes and this many more for the
 * filesystem's map of the file (ext4's extent tree holds 12 bytes per
 * run of allocated blocks, at most one run per block), so that the
 * file's disk use stays under the limit.
 */
#define SPACE_PER_BLOCK 16

/* Copies the overlay can do without (a read's copy-up, the fill) leave
 * an eighth of the limit to the requests that need space: the
 * clients' writes.
 */
static inline uint64_t
space_reserve_of (uint64_t limit)
{
  return limit == UINT64_MAX ? 0 : limit / 8;
}

struct space {
  struct spacecap cap;
  bool full_logged;             /* the first refusal was logged */
  uint64_t refusals;            /* requests refused, atomic */
};

/* The charge of n blocks holding bytes bytes. */
static inline uint64_t
space_of (uint64_t bytes, uint64_t n)
{
  return bytes + SPACE_PER_BLOCK * n;
}

/* Nothing counted yet, against a limit of bytes (UINT64_MAX: none).
 * Before any other call.
 */
extern void space_init (struct space *space, uint64_t bytes);

/* Counts bytes that are there already (a kept overlay's header, state
 * area and blocks), even past the limit.
 */
extern void space_charge (struct space *space, uint64_t bytes);

/* Takes bytes for a request: from *hold first, if hold is not NULL
 * (space its request took up front), the rest from the budget.  Fails
 * with *err ENOSPC, changing nothing, and logs the first refusal: a
 * writer running into the limit would otherwise fill the log.
 * Returns 0 or -1.
 */
extern int space_take (struct space *space, uint64_t *hold, uint64_t bytes,
                       int *err);

/* space_take in two steps: the take, silent, whether it took them;
 * and the refusal, logged and counted, returning -1.
 */
extern bool space_try_take (struct space *space, uint64_t *hold,
                            uint64_t bytes);
extern int space_refuse (struct space *space, int *err);
extern void space_give (struct space *space, uint64_t bytes);

/* Takes bytes for a copy the overlay can do without, only if they
 * leave space_reserve_of the limit: refused, it says nothing and
 * counts no refusal.  Returns whether it took them.
 */
extern bool space_take_spare (struct space *space, uint64_t bytes);

/* The limit (UINT64_MAX if none), the space counted, and the requests
 * refused.
 */
extern uint64_t space_limit (const struct space *space);
extern uint64_t space_used (const struct space *space);
extern uint64_t space_refusals (const struct space *space);

#endif /* COW_SPACE_H */
