#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdkit stopping while a deleted view's places go back in the
# background stops the give-back short and stops at once: the file
# checks clean, reads as flushed, and nbdcow info counts what was left
# in bytes_to_give_back, which the next open gives back.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
ov=$tmp/ov.cow
uri="nbd+unix:///?socket=$tmp/sock"
truncate -s $(( 512 * M )) "$tmp/base"
serve_views cow-file="$ov"
view_keeping 256
nbdcopy "$uri" "$tmp/flushed"
"$NBDCOW" view delete "$tmp/ctl" "" v
"$NBDCOW" view show "$tmp/ctl" "" > "$tmp/show"
grep -q "state: giving-back" "$tmp/show" ||
  fail "the deletion returned with its places back: $(cat "$tmp/show")"
grep -q "^blocks_left: [1-9]" "$tmp/show" ||
  fail "view show gives no blocks left: $(cat "$tmp/show")"
start=$(date +%s%N)
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
echo "nbdkit stopped in $(( ($(date +%s%N) - start) / 1000000 )) ms"

"$NBDCOW" check "$ov" > "$tmp/check" 2>&1 || fail "check: $(cat "$tmp/check")"
left=$("$NBDCOW" info --json "$ov" | jq .bytes_to_give_back)
[ "$left" -gt 0 ] ||
  fail "the stop let the give-back finish (nothing left to give back)"
echo "the stop left $left bytes to give back"

rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
cmp "$tmp/flushed" <(nbdcopy "$uri" -) ||
  fail "after a stop during the give-back the export does not read as flushed"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
left=$("$NBDCOW" info --json "$ov" | jq .bytes_to_give_back)
[ "$left" -eq 0 ] || fail "the next open left $left bytes to give back"
echo "a stop cuts the give-back short; the next open gives back the rest"
