/* SPDX-License-Identifier: BSD-3-Clause
 * Copyright (C) 2026 the nbdkit-cow authors.
 */

/* The records of the statistics (statsrecords.h). */

#include <config.h>

#include "statsrecords.h"

void
stats_sum_counters (const struct shardctr *counters, struct export_stats *e)
{
  unsigned t;

  for (t = 0; t < REQ_TYPES; ++t) {
    e->requests[t] = shardctr_sum (counters, 2 * t);
    e->request_bytes[t] = shardctr_sum (counters, 2 * t + 1);
  }
  e->plugin_opens = shardctr_sum (counters, STATS_PLUGIN_OPENS);
}
