#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Format version 6 keeps a second slot of a block, its place 1, and
# which of its units lie there (docs/overlay-format.md), and so do
# versions 7 to 9, with the log.  A new file is version 9; rewritten
# as version 5 and back through 6, 7 and 8 (tests/kept-format.py v5,
# v6, v7, v8, v9) it
# reads the same: nbdkit serves each, writes into it and
# restarts on it (it keeps its version), and nbdcow info, check,
# export and commit agree.  With
# units moved to place 1, their bytes in place 0 overwritten, nbdcow
# check, export and commit read them from place 1, and so does nbdkit,
# which gives back what lies in the other place when it opens the file
# (check counts it before), writes into them there, zeroes a block
# holding them, and restarts reading the same.  Units in place 1 that a block does not
# hold, or with no slot there, and a place-1 slot another place has,
# are damage: check counts them, the filter refuses the file.
. "$abs_top_srcdir/tests/functions.sh"

ov=$tmp/ov
uri="nbd+unix:///?socket=$tmp/sock"
serve ()
{
  rm -f "$tmp/sock"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
    cow-block-size="$B"
}
stop () { stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"; }
version () { jq -r .format_version <("$NBDCOW" info --json "$ov"); }

# reads_as IMAGE WHAT: nbdcow check, export and commit see IMAGE.
reads_as ()
{
  "$NBDCOW" check "$ov" >/dev/null || fail "B=$B $2: nbdcow check"
  rm -f "$tmp/o.qcow2"
  "$NBDCOW" export "$ov" --base="$tmp/base" "$tmp/o.qcow2"
  qemu-img compare -q "$tmp/o.qcow2" "$1" ||
    fail "B=$B $2: the export reads otherwise"
  cp "$tmp/base" "$tmp/target"
  "$NBDCOW" commit "$ov" "$tmp/target" >/dev/null
  cmp "$tmp/target" "$1" || fail "B=$B $2: the commit differs"
}

# write_restart WHAT SCRIPT: with nbdkit serving, the nbdsh SCRIPT's
# writes, flushed, into $tmp/live.img; after a restart, the same.
write_restart ()
{
  nbdsh -u "$uri" -c "$2
h.flush()"
  nbdcopy "$uri" "$tmp/live.img"
  stop
  serve
  nbdcopy "$uri" "$tmp/again.img"
  stop
  cmp "$tmp/live.img" "$tmp/again.img" ||
    fail "B=$B $1: reads otherwise after a restart"
}

for B in 8192 65536; do
  size=$(( 6 * B + 5000 ))
  head -c "$size" /dev/urandom > "$tmp/base"
  rm -f "$ov"
  serve
  # Block 0 whole, block 1 in part (64K), block 6 (the short last one)
  # whole, block 3 in part.
  nbdsh -u "$uri" -c "
B = $B
h.pwrite(b'\x11' * B, 0)
h.pwrite(b'\x22' * 4096, B + 8192)
h.pwrite(b'\x33' * 5000, 6 * B)
h.pwrite(b'\x44' * 100, 3 * B + 300)
h.flush()
"
  nbdcopy "$uri" "$tmp/live.img"
  stop
  [ "$(version)" = 9 ] || fail "B=$B: a new file is not version 9"
  reads_as "$tmp/live.img" "version 9"
  bytes=$(jq .data_bytes <("$NBDCOW" info --json "$ov"))

  # As version 5, and back through 6, 7 and 8.
  for v in 5 6 7 8 9; do
    "$PYTHON" "$abs_top_srcdir/tests/kept-format.py" "v$v" "$ov"
    jq -e ".data_bytes == $bytes" <("$NBDCOW" info --json "$ov") \
      >/dev/null || fail "B=$B: info counts other bytes in version $v"
    reads_as "$tmp/live.img" "version $v"
    serve
    nbdcopy "$uri" "$tmp/again.img"
    cmp "$tmp/live.img" "$tmp/again.img" ||
      fail "B=$B: nbdkit reads a version $v file otherwise"
    write_restart "version $v written" "
h.pwrite(b'\x55' * 512, 2 * $B + 1000 + $v)"
    [ "$(version)" = "$v" ] || fail "B=$B: the filter changed version $v"
    bytes=$(jq .data_bytes <("$NBDCOW" info --json "$ov"))
  done

  # Units of blocks 0 (whole), 3 and at 64K 1 (in part) and 6 (the
  # short last one) in place 1, their old place overwritten.
  moves="0:0x1 3:0x1 6:0x1"
  [ "$B" = 65536 ] && moves="0:0x6 1:0x4 3:0x1 6:0x1"
  cp "$ov" "$tmp/v6"
  # shellcheck disable=SC2086
  "$PYTHON" "$abs_top_srcdir/tests/kept-format.py" move "$ov" $moves
  reads_as "$tmp/live.img" "with units in place 1"
  jq -e ".data_bytes == $(jq .data_bytes <("$NBDCOW" info --json "$tmp/v6"))" \
    <("$NBDCOW" info --json "$ov") >/dev/null ||
    fail "B=$B: info counts other bytes with units in place 1"
  # What lies in the place a unit is not in (what only a view kept)
  # is data outside the overlay's blocks: check counts it, and nbdkit
  # gives it back when it opens the file.
  outside="bytes of data outside the overlay's blocks"
  "$NBDCOW" check "$ov" | grep -q "$outside" ||
    fail "B=$B: check does not count the bytes in the other place"
  # nbdkit serves it alike, writes into the units in place 1 (and
  # around them) there, zeroes a block with them (3), and restarts on
  # it.
  serve
  nbdcopy "$uri" "$tmp/again.img"
  cmp "$tmp/live.img" "$tmp/again.img" ||
    fail "B=$B: nbdkit reads units in place 1 otherwise"
  write_restart "with units in place 1 written" "
h.pwrite(b'\x66' * 3000, 100)
h.pwrite(b'\x77' * 9000, 3 * $B - 4000)
h.pwrite(b'\x88' * 4096, $B)
h.zero($B, 3 * $B)"
  reads_as "$tmp/live.img" "with units in place 1, written by nbdkit"
  ! "$NBDCOW" check "$ov" | grep -q "$outside" ||
    fail "B=$B: nbdkit did not give back the bytes in the other place"

  # Damage: units in place 1 with no slot there, units the block does
  # not hold (at 8K, of a block not in the overlay), a place-1 slot
  # that is the block's own place-0 slot, a place-1 slot past the
  # highest slot number.
  for damage in "0 0 0x1" "1 100 0x1" "0 1 0x1" "0 0xffffffff 0x1"; do
    cp "$tmp/v6" "$ov"
    # shellcheck disable=SC2086
    "$PYTHON" "$abs_top_srcdir/tests/kept-format.py" places "$ov" $damage
    status=0
    "$NBDCOW" check "$ov" > "$tmp/check" || status=$?
    [ "$status" = 2 ] && grep -q "units in place 1" "$tmp/check" ||
      fail "B=$B: check of $damage: exit $status: $(cat "$tmp/check")"
    expect_start_failure "cow-file=$ov: corrupted block states" \
      --filter=cow file "$tmp/base" cow-file="$ov" cow-block-size="$B"
  done
  echo "B=$B: versions 6 to 9 read alike in nbdkit and nbdcow, units in place 1 too; damage caught"
done
