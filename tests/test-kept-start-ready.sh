#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# After a restart a kept overlay's export takes checkpoints and fills
# before any client connects: its size is in its file.  A named
# export's file takes checkpoints too.  A base of
# another size is still refused at the first connection, naming the
# file, and nbdkit stops with status 1; the fill, meeting it first,
# stops, failed, with the same message (unless the overlay holds every
# block: then it stands alone, test-kept-alone-restart.sh).
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 8 * M ))
ov=$tmp/ov.cow ctl=$tmp/ctl stats=$tmp/stats.json
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c 'h.pwrite(b"w" * 65536, 1 << 20); h.flush()'
nbdsh -u "nbd+unix:///foo?socket=$tmp/sock" -c 'h.pwrite(b"f" * 65536, 0); h.flush()'
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# No NBD client at all: a checkpoint, and the whole fill; a named
# export's file takes checkpoints too.
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow --filter=log file "$tmp/base" \
  logfile="$tmp/log" cow-file="$ov" cow-control="$ctl" cow-fill=true \
  cow-stats="$stats"
"$NBDCOW" checkpoint create "$ctl" "" c1 ||
  fail "no checkpoint before a client connected"
fill_state_is "$stats" complete
[ "$("$NBDCOW" checkpoint list "$ctl" "")" = c1 ] || fail "c1 not listed"
"$NBDCOW" checkpoint create "$ctl" foo f1 ||
  fail "no checkpoint of foo before a client connected"
"$NBDCOW" checkpoint create "$ctl" foo f2 || fail "no second checkpoint of foo"
[ "$("$NBDCOW" checkpoint list "$ctl" foo | tr '\n' ' ')" = "f1 f2 " ] ||
  fail "foo's checkpoints: $("$NBDCOW" checkpoint list "$ctl" foo)"
"$NBDCOW" checkpoint create "$ctl" bar b1 2>"$tmp/err" &&
  fail "a checkpoint of bar, which has no file"
grep -q 'export "bar": no client has opened it' "$tmp/err" ||
  fail "bar refused with: $(cat "$tmp/err")"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
"$NBDCOW" info --json "$ov.foo" | jq -e '[.checkpoints[].name] == ["f1", "f2"]' \
  >/dev/null || fail "foo's file: $("$NBDCOW" info --json "$ov.foo")"
"$NBDCOW" info "$ov" | grep -q '^complete: yes' ||
  fail "the fill did not complete the file: $("$NBDCOW" info "$ov")"
cmp <("$NBDKIT" -U - --filter=cow file "$tmp/base" cow-file="$ov" \
        --run 'nbdcopy "$uri" -') \
    <(head -c $M "$tmp/base"; printf 'w%.0s' $(seq 65536); tail -c +$(( M + 65537 )) "$tmp/base") ||
  fail "the filled overlay reads wrong"

# Another base size: the fill fails naming the file, the first
# connection is refused and nbdkit stops with status 1.  (A complete
# overlay stands alone and asks its plugin nothing: the file here holds
# one block.)
rm -f "$ov" "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c 'h.pwrite(b"w" * 65536, 1 << 20); h.flush()'
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
truncate -s $(( 9 * M )) "$tmp/base9"
rm -f "$tmp/sock2"
"$NBDKIT" -f -U "$tmp/sock2" --filter=cow file "$tmp/base9" cow-file="$ov" \
  cow-fill=true cow-stats="$stats" 2>"$tmp/err" &
pid=$!
on_exit "kill $pid 2>/dev/null"
fill_state_is "$stats" failed
grep -q "cow-file=$ov: made for a base of 8388608 bytes, this base has 9437184" \
  "$tmp/err" || fail "the fill's refusal: $(cat "$tmp/err")"
! nbdinfo --size "nbd+unix:///?socket=$tmp/sock2" >/dev/null 2>&1 ||
  fail "a client was served a base of another size"
status=0
timeout 30 tail --pid=$pid -f /dev/null || fail "nbdkit did not stop"
wait $pid || status=$?
[ "$status" -eq 1 ] || fail "nbdkit exited with $status, not 1"
"$NBDCOW" check "$ov" || fail "the refused base left the file unsound"
