#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The README's way to stop a server and wait for it: once
# "kill $(cat PIDFILE); tail --pid=$(cat PIDFILE) -f /dev/null" returns,
# nbdkit has exited, so nbdcow finds its kept overlay closed and
# unlocked, every time (a bare kill and nbdcow at once found it locked
# 4 times in 5).
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/disk.img" $((8 << 20))
for round in 1 2 3 4 5; do
  rm -f "$tmp/sock"
  "$NBDKIT" -U "$tmp/sock" -P "$tmp/nbdkit.pid" --filter=cow \
    file "$tmp/disk.img" cow-file="$tmp/changes.cow"
  nbdsh -u "nbd+unix:///?socket=$tmp/sock" \
    -c "h.pwrite(b'$round' * 65536, $round * 65536)"
  kill $(cat "$tmp/nbdkit.pid"); tail --pid=$(cat "$tmp/nbdkit.pid") -f /dev/null
  "$NBDCOW" info "$tmp/changes.cow" > "$tmp/info" 2>&1 ||
    fail "round $round: $(cat "$tmp/info")"
  grep -q "closed cleanly: yes" "$tmp/info" ||
    fail "round $round: not closed cleanly: $(cat "$tmp/info")"
done
echo "5 rounds: the overlay closed and unlocked once the wait returned"
