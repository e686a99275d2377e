#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-stats=FILE lists an export as soon as a client of it is served,
# not at the report's next second: each of four exports opened in turn
# is in the report within a fifth of a second of its client's
# connection (a report a second would find all four there by chance
# less than once in 600 runs).
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/disk" $(( 1024 * 1024 ))
stats=$tmp/stats.json
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/disk" cow-stats="$stats"
wait=$(rounds 0.2 2)
for name in a b c d; do
  nbdsh -u "nbd+unix:///$name?socket=$tmp/sock" -c "
import json, sys, time
deadline = time.monotonic() + $wait
while time.monotonic() < deadline:
    try:
        names = [e['name'] for e in json.load(open('$stats'))['exports']]
    except ValueError:          # caught being replaced
        names = []
    if '$name' in names:
        break
    time.sleep(0.01)
else:
    sys.exit('export $name is not in the report $wait s after it was served')
" || fail "the report lags its exports"
done
