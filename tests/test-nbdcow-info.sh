#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow info and map tell what a kept overlay holds, in text and JSON:
# blocks by state, runs merged, whether it was closed cleanly and how
# often it was recovered from a crash; they refuse a file nbdkit
# serves; and a file of format version 1 still opens, in nbdcow and in
# the filter (version 2: tests/test-kept-v2.sh).
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $((8 * 1024 * 1024))          # 128 blocks of 64K
uri="nbd+unix:///?socket=$tmp/sock"
ov=$tmp/ov
B=65536
# info_is JQ-EXPRESSION WHAT: nbdcow info --json of the overlay says so.
info_is ()
{
  jq -e "$1" <("$NBDCOW" info --json "$ov") >/dev/null ||
    fail "$2: $("$NBDCOW" info --json "$ov")"
}

start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "
h.pwrite(b'x' * 100, 3 * $B + 10)        # block 3: its first 4K sub-block
h.pwrite(b'y' * (2 * $B), 10 * $B)       # blocks 10 and 11
h.zero(5 * $B, 20 * $B)                  # blocks 20 to 24, trimmed
h.flush()
"
expect_exit 3 "nbdcow: $ov: in use: locked by another process" \
  "$NBDCOW" info "$ov"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"

"$NBDCOW" info "$ov"
info_is ".format_version == 9 and .block_size == $B and
         .base_size == 128 * $B and .export_name == \"\" and
         .blocks == { base: 120, overlay: 3, zero: 5, partial: 1 } and
         .data_bytes == 2 * $B + 4096 and .zero_bytes == 5 * $B and
         .bytes_on_disk >= 2 * $B + 4096 and .closed_cleanly == true and
         .recoveries == 0" "info --json"

want="0 $((3 * B)) base
$((3 * B)) 4096 overlay
$((3 * B + 4096)) $((7 * B - 4096)) base
$((10 * B)) $((2 * B)) overlay
$((12 * B)) $((8 * B)) base
$((20 * B)) $((5 * B)) zero
$((25 * B)) $((103 * B)) base"
got=$("$NBDCOW" map "$ov" | awk '{ print $1, $2, $3 }')
[ "$got" = "$want" ] || fail "map: $got"
got=$("$NBDCOW" map --json "$ov" | jq -r '.[] | "\(.offset) \(.length) \(.state)"')
[ "$got" = "$want" ] || fail "map --json: $got"

# Killed after a flush: not closed cleanly.  The filter opening it
# counts one recovery, and marks it clean again when it stops.
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "h.pwrite(b'z' * $B, 30 * $B); h.flush()"
kill -9 "$(cat "$tmp/sock.pid")"
sleep 0.5
rm -f "$tmp/sock"
"$NBDCOW" info "$ov" | grep -q '^closed cleanly: no' ||
  fail "a killed overlay reads as closed cleanly"
info_is '.closed_cleanly == false and .blocks.overlay == 4' "after kill -9"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "assert h.pread($B, 30 * $B) == b'z' * $B"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"
info_is '.closed_cleanly == true and .recoveries == 1' "after recovery"

# Format version 1 (version 2 without flags): nbdcow opens it and says
# what it cannot know; the filter serves it and leaves it version 2.
"$PYTHON" "$tests/kept-format.py" v2 "$ov" "$tmp/base"
"$PYTHON" "$tests/kept-format.py" header "$ov" version=1 flags=0 recoveries=0
"$NBDCOW" info "$ov" | grep -q '^closed cleanly: unknown (format version 1' ||
  fail "version 1 info"
info_is '.format_version == 1 and .closed_cleanly == null' "version 1"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "
assert h.pread($B, 30 * $B) == b'z' * $B
assert h.pread(100, 3 * $B + 10) == b'x' * 100
assert h.pread($B, 22 * $B) == bytes($B)
"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
info_is '.format_version == 2 and .closed_cleanly == true' "version 1 upgraded"

# Usage errors exit 1, with the subcommand's usage; --help exits 0.
expect_exit 1 "expected one FILE" "$NBDCOW" info
expect_exit 1 "unknown subcommand 'frob'" "$NBDCOW" frob "$ov"
"$NBDCOW" --help | grep -q 'nbdcow map' || fail "--help"
for sub in info map check commit export; do
  expect_exit 0 "^usage: nbdcow $sub " "$NBDCOW" "$sub" --help
  expect_exit 1 "^nbdcow: $sub: unrecognized option '--jsn'" \
    "$NBDCOW" "$sub" --jsn "$ov"
  grep -q "^usage: nbdcow $sub " "$tmp/out" || fail "$sub --jsn: no usage"
  ! grep -v "^nbdcow: \|^usage: \|^See nbdcow(1)" "$tmp/out" ||
    fail "$sub --jsn: a line that is neither nbdcow's message nor the usage"
done
expect_exit 1 "^nbdcow: map: option '--json=1' takes no value" \
  "$NBDCOW" map --json=1 "$ov"
expect_exit 1 "^nbdcow: commit: option '--connections' needs a value" \
  "$NBDCOW" commit "$ov" /dev/null --connections
