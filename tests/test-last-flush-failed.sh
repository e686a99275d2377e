#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A kept overlay whose last flush fails (its filesystem full as nbdkit
# stops) makes nbdkit exit with status 1, naming the file; nbdcow then
# says that the last flush failed, not that the writer crashed, and the
# next start holds what was flushed before.
. "$abs_top_srcdir/tests/functions.sh"

small_tmpfs "$tmp/small" 4m
truncate -s 8G "$tmp/base"
ov=$tmp/small/k.cow

"$NBDKIT" -f -U "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
  2>"$tmp/err" &
pid=$!
on_exit "kill -9 $pid 2>/dev/null"
for _ in $(seq 300); do [ -S "$tmp/sock" ] && break; sleep 0.1; done
# A flushed write, then writes in 40 state pages never written yet.
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c '
h.pwrite(b"flushed", 0)
h.flush()
for i in range(1, 41):
    h.pwrite(b"lost", i * 64 * 1024 * 1024)
'
dd if=/dev/zero of="$tmp/small/filler" bs=64K 2>/dev/null || true
kill "$pid"
status=0
for _ in $(seq 600); do
  running "$pid" || break
  sleep 0.1
done
if running "$pid"; then
  kill -9 $pid
  fail "nbdkit did not stop"
fi
wait $pid || status=$?
[ "$status" -eq 1 ] || fail "nbdkit exited with $status, not 1"
grep -q "cow-file=$ov: the last flush failed" "$tmp/err" ||
  fail "no message: $(cat "$tmp/err")"
rm "$tmp/small/filler"

"$NBDCOW" info "$ov" | grep -q 'closed cleanly: no (its writer stopped after its last flush failed' ||
  fail "nbdcow info: $("$NBDCOW" info "$ov")"
"$NBDCOW" info --json "$ov" | jq -e '.last_flush_failed and .closed_cleanly == false' >/dev/null ||
  fail "nbdcow info --json: $("$NBDCOW" info --json "$ov")"
"$NBDCOW" check "$ov" | grep -q 'its writer stopped after its last flush failed' ||
  fail "nbdcow check: $("$NBDCOW" check "$ov")"

"$NBDKIT" -U - --filter=cow file "$tmp/base" cow-file="$ov" --run '
  nbdsh -u "$uri" -c "assert h.pread(7, 0) == b\"flushed\""' ||
  fail "the flushed write did not come back"
"$NBDCOW" info --json "$ov" | jq -e '.closed_cleanly and (.last_flush_failed | not) and .recoveries == 1' >/dev/null ||
  fail "after recovery: $("$NBDCOW" info --json "$ov")"
