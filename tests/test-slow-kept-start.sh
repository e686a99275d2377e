#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# An export whose kept file is slow to start (its first write, the
# header, takes 8 s: tests/overlay-faults.c) holds up no other export:
# under cow-fill, whose threads look at every overlay, a client of
# another export connects and the statistics are rewritten meanwhile.
. "$abs_top_srcdir/tests/functions.sh"

shim=$abs_top_builddir/tests/.libs/overlay-faults.so
[ -f "$shim" ] || fail "no $shim"
touch "$tmp/fault"
NBDKIT_PRELOAD="$shim" COW_FAULT_FILE="$tmp/fault" COW_FAULT_RATE=100 \
  COW_FAULT_DELAY_MS=8000 COW_FAULT_MATCH=/ov.slow \
  start_nbdkit "$tmp/sock" --filter=cow memory 64M cow-file="$tmp/ov" \
  cow-fill=true cow-stats="$tmp/stats.json"
nbdinfo --size "nbd+unix:///slow?socket=$tmp/sock" > "$tmp/slow.out" &
slow=$!
on_exit "rm -f '$tmp/fault'"     # the flushes at exit are not slowed
for _ in $(seq 100); do [ -e "$tmp/ov.slow" ] && break; sleep 0.1; done
[ -e "$tmp/ov.slow" ] || fail "export slow's kept file was never made"
sleep 0.5                       # the fill's threads look again by then

start=$(date +%s%N)
nbdinfo --size "nbd+unix:///fast?socket=$tmp/sock" > "$tmp/fast.out" ||
  fail "a client of export fast was refused"
ms=$(( ($(date +%s%N) - start) / 1000000 ))
before=$(jq .seconds "$tmp/stats.json")
sleep 1.5
after=$(jq .seconds "$tmp/stats.json")
echo "export fast connected in $ms ms; statistics at $before s, then $after s"
[ "$ms" -lt 2000 ] ||
  fail "a client of export fast waited $ms ms on export slow's start"
jq -n "$after > $before" | grep -q true ||
  fail "the statistics were not rewritten while export slow started"
running "$slow" ||
  fail "export slow started before the others were timed: nothing shown"
wait "$slow" || fail "the client of export slow failed"
[ "$(cat "$tmp/slow.out")" = 67108864 ] || fail "export slow: $(cat "$tmp/slow.out")"
