/* Copyright (C) 2026 the nbdkit-cow authors.  See README.md for the licence. */

/* The thread that ends overlays whose clients have left (lifetime.h),
 * a background thread of its own (bgthread.h).
 */

#include <config.h>

#include <stdint.h>

#include <nbdkit-filter.h>

#include "bgthread.h"
#include "lifetime.h"

static struct bgthread thread = BGTHREAD_INIT;
static lifetime_end_due *end_due;

static uint64_t
call_end_due (uint64_t now, void *opaque)
{
  return end_due (now);
}

int
lifetime_start (lifetime_end_due *fn)
{
  end_due = fn;
  if (bgthread_start (&thread, call_end_due, NULL) == -1) {
    nbdkit_error ("cow-lifetime: cannot start a thread: %m");
    return -1;
  }
  return 0;
}

void
lifetime_wake (void)
{
  bgthread_wake (&thread);
}

void
lifetime_stop (void)
{
  bgthread_stop (&thread);
}
