#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow check --repair of a file a crash left with marks that may miss
# a change (MARKS_STALE: a write in place after a checkpoint was in
# flight) marks it closed cleanly but keeps it stale: the marks stay
# inexact, and every block still counts as changed since the
# checkpoint, in nbdcow and in the filter.
. "$abs_top_srcdir/tests/functions.sh"

B=65536
ov=$tmp/ov
head -c $(( 8 * B )) /dev/urandom > "$tmp/base"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
  cow-control="$tmp/ctl"
uri="nbd+unix:///?socket=$tmp/sock"
nbdsh -u "$uri" -c "
h.pwrite(b'a' * $B, 0)
h.pwrite(b'b' * $B, 4 * $B)
h.flush()"
"$NBDCOW" checkpoint create "$tmp/ctl" "" cp >/dev/null
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
# What a crash leaves while a write in place is in flight: open, stale.
"$PYTHON" "$abs_top_srcdir/tests/kept-format.py" header "$ov" flags=5
jq -e '.marks_exact == false and .closed_cleanly == false' \
  <("$NBDCOW" info --json "$ov") >/dev/null ||
  fail "the crashed file: $("$NBDCOW" info --json "$ov")"

"$NBDCOW" check --repair "$ov" > "$tmp/check" ||
  fail "check --repair: $(cat "$tmp/check")"
grep -q "marked closed cleanly" "$tmp/check" ||
  fail "check --repair did not mend: $(cat "$tmp/check")"
jq -e '.marks_exact == false and .closed_cleanly == true' \
  <("$NBDCOW" info --json "$ov") >/dev/null ||
  fail "after check --repair: $("$NBDCOW" info --json "$ov")"
changed=$("$NBDCOW" map --json --since=cp "$ov" |
          jq '[.[] | select(.state == "overlay") | .length] | add')
[ "$changed" = $(( 2 * B )) ] ||
  fail "after check --repair, changed since cp: $changed bytes, not every block"
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
  cow-changes-separator=+
changed=$(nbdinfo --map --json "nbd+unix:///+cp?socket=$tmp/sock" |
          jq '[.[] | select(.type == 0) | .length] | add')
[ "$changed" = $(( 2 * B )) ] ||
  fail "the filter, after check --repair: changed since cp: $changed bytes"
echo "check --repair keeps a file's stale marks stale"
