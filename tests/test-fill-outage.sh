#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Without cow-fill-retries the fill tries a failing source again
# without end, 1, 2, 4... seconds apart: past the 31 seconds that the
# five tries of a limit of 5 take, it is still running (its error and
# tries in the statistics, "try N" in the log).  test-fill-errors.sh
# shows it complete once the source is back.  31 seconds of waiting:
# the plain suite only.
. "$abs_top_srcdir/tests/functions.sh"
requires_filter error
instrumented && skip "31 seconds of retries: the plain suite only"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
stats=$tmp/stats.json
touch "$tmp/failing"
start_nbdkit "$tmp/sock" --filter=cow --filter=error file "$tmp/base" \
  error=EIO error-pread-rate=100% error-file="$tmp/failing" \
  cow-fill=true cow-fill-requests=1 cow-stats="$stats"
nbdinfo --size "nbd+unix:///?socket=$tmp/sock" >/dev/null
fill_retrying "$stats" 6 45
grep -q 'trying again in 32 s (try 6)' "$tmp/sock.err" ||
  fail "the sixth try is not in the log: $(grep cow-fill "$tmp/sock.err")"
