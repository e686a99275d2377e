#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow check tells a sound overlay (exit 0) from a damaged one (2)
# and from a file it cannot use at all (3), saying what is wrong with
# which file; --repair mends only what it can mend without guessing,
# and the filter then serves the repaired file with every flushed
# write.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $((8 * 1024 * 1024))          # 128 blocks of 64K
uri="nbd+unix:///?socket=$tmp/sock"
ov=$tmp/ov
B=65536

start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "
h.pwrite(b'x' * $B, 2 * $B)
h.pwrite(b'y' * $B, 40 * $B)
h.flush()
"
expect_exit 3 "$ov: in use: locked by another process" "$NBDCOW" check "$ov"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"
cp "$ov" "$tmp/good"
# The state area's and data area's offsets, from the header
# (docs/overlay-format.md).
header_field () { od -An -tu8 -j"$2" -N8 "$1" | tr -d ' '; }
states=$(header_field "$tmp/good" 32)
data_offset=$(header_field "$tmp/good" 48)

expect_exit 0 "$ov: no errors found" "$NBDCOW" check "$ov"

damage ()
{
  cp "$tmp/good" "$ov"
  printf "$2" | dd of="$ov" bs=1 seek="$1" conv=notrunc 2>/dev/null
}
damage 0 'X'
expect_exit 3 "nbdcow: $ov: not a cow overlay \(bad magic\)" "$NBDCOW" check "$ov"
damage 8 '\012'
expect_exit 3 "nbdcow: $ov: unsupported format version" "$NBDCOW" check "$ov"
damage 24 '\001'
expect_exit 2 "nbdcow: $ov: corrupted header \(checksum mismatch\)" \
  "$NBDCOW" check "$ov"
expect_exit 2 "corrupted header" "$NBDCOW" check --repair "$ov"
expect_exit 2 "corrupted header" "$NBDCOW" info "$ov"

# The states (16 bytes a block, docs/overlay-format.md): block 2 is in
# slot 0, block 40 in slot 1.  A slot past the end of the file, and a
# slot that two blocks claim, are damage that no repair can mend.
past_end="damaged: truncated: 1 blocks lie in slots past the end of the file \([0-9]+ bytes; cannot repair"
damage $(( states + 1 )) '\377'   # block 0 in slot 65278
expect_exit 2 "$ov: $past_end" "$NBDCOW" check "$ov"
expect_exit 2 "$past_end" "$NBDCOW" check --repair "$ov"
expect_exit 2 "corrupted block states or truncated file \(block 0 is in slot 65278, past the end of the file\)" \
  "$NBDCOW" map "$ov"
damage $(( states + 16 * 5 )) '\002'  # block 5 in slot 0 too
expect_exit 2 "$ov: damaged: 1 blocks have a slot that another block has too \(cannot repair" \
  "$NBDCOW" check "$ov"
expect_exit 2 "corrupted block states \(block 5 is in slot 0, which another block has\)" \
  "$NBDCOW" info "$ov"
# The sub-blocks a block holds (the entry's second 4 bytes): none can
# be held by a block that reads from the base, nor past the 16 of a
# 64K block.
damage $(( states + 16 * 7 + 4 )) '\001'  # block 7, from the base
expect_exit 2 "$ov: damaged: 1 blocks name sub-blocks they cannot hold \(cannot repair" \
  "$NBDCOW" check "$ov"
expect_exit 2 "corrupted block states \(block 7 holds sub-blocks 0x1, which it cannot\)" \
  "$NBDCOW" info "$ov"
damage $(( states + 16 * 2 + 6 )) '\001'  # block 2, sub-block 16
expect_exit 2 "corrupted block states \(block 2 holds sub-blocks 0x10000, which it cannot\)" \
  "$NBDCOW" map "$ov"
head -c 5000 "$tmp/good" > "$ov"
expect_exit 2 "$ov: not a cow overlay \(truncated header\)" "$NBDCOW" check "$ov"
echo "some text file" > "$ov"
expect_exit 3 "$ov: not a cow overlay" "$NBDCOW" check "$ov"
: > "$ov"
expect_exit 3 "$ov: empty: not a cow overlay yet, so it holds no changes \(nbdkit lays" \
  "$NBDCOW" info "$ov"
expect_exit 3 "$tmp/missing: No such file or directory" \
  "$NBDCOW" check "$tmp/missing"
expect_exit 3 "$tmp: (not a regular file|Is a directory)" "$NBDCOW" check "$tmp"

# Cut inside block 40's slot: its data is gone.  Cut inside the states:
# what they held is gone.
cp "$tmp/good" "$ov"
truncate -s $(( data_offset + B + 100 )) "$ov"
expect_exit 2 "$ov: $past_end" "$NBDCOW" check --repair "$ov"
truncate -s 10000 "$ov"
expect_exit 2 "$ov: damaged: truncated to 10000 bytes, its layout takes $data_offset" \
  "$NBDCOW" check "$ov"
expect_exit 2 "cannot repair: the block states are cut short" \
  "$NBDCOW" check --repair "$ov"
expect_exit 2 "truncated: shorter than its header says" "$NBDCOW" info "$ov"

# Cut between its states and its data, a file with no block in a slot
# (only zeroed blocks) lost nothing: --repair extends it, and the
# filter then serves it.
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/zeros"
nbdsh -u "$uri" -c "h.zero(3 * $B, $B); h.flush()"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"
cp "$tmp/zeros" "$ov"
truncate -s 200000 "$ov"   # past the log, which ends at 24K + 128K
expect_exit 2 "$ov: damaged: truncated to 200000 bytes, its layout takes $data_offset" \
  "$NBDCOW" check "$ov"
expect_exit 0 "$ov: repaired: extended to $data_offset bytes" \
  "$NBDCOW" check --repair "$ov"
expect_exit 0 "$ov: no errors found" "$NBDCOW" check "$ov"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "
assert h.pread($B, 3 * $B) == bytearray($B)
assert h.pread($B, 4 * $B) == bytearray(open('$tmp/base', 'rb').read()[4 * $B:5 * $B])
"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"

# Format version 2 stores block b at its own offset, 2 bits of state a
# block, and the file is as long as the base: the value 3 is damage,
# and a file cut short after its last block in the overlay (block 40)
# is repaired by extending it; cut inside it, its data is gone.
cp "$tmp/good" "$tmp/v2"
"$PYTHON" "$tests/kept-format.py" v2 "$tmp/v2"
v2_length=$(stat -c %s "$tmp/v2")
v2_data_offset=$(header_field "$tmp/v2" 48)
cp "$tmp/v2" "$ov"
expect_exit 0 "$ov: no errors found" "$NBDCOW" check "$ov"
printf '\377' | dd of="$ov" bs=1 seek=8193 conv=notrunc 2>/dev/null
expect_exit 2 "$ov: damaged: 4 blocks have the invalid state 3 \(cannot repair" \
  "$NBDCOW" check "$ov"
expect_exit 2 "invalid state 3" "$NBDCOW" check --repair "$ov"
expect_exit 2 "corrupted block states \(block 4 has the invalid state 3\)" \
  "$NBDCOW" map "$ov"
cp "$tmp/v2" "$ov"
truncate -s $(( v2_data_offset + 60 * B )) "$ov"
expect_exit 2 "$ov: damaged: truncated to $(( v2_data_offset + 60 * B )) bytes, its layout takes $v2_length" \
  "$NBDCOW" check "$ov"
expect_exit 0 "$ov: repaired: extended to $v2_length bytes" \
  "$NBDCOW" check --repair "$ov"
expect_exit 0 "no errors found" "$NBDCOW" check "$ov"
truncate -s $(( v2_data_offset + 40 * B + 100 )) "$ov"
expect_exit 2 "cannot repair: blocks in the overlay reach past the end" \
  "$NBDCOW" check --repair "$ov"
cp "$tmp/zeros" "$tmp/v2-zeros"
"$PYTHON" "$tests/kept-format.py" v2 "$tmp/v2-zeros"
cp "$tmp/v2-zeros" "$ov"
truncate -s 20000 "$ov"
expect_exit 0 "$ov: repaired: extended to $v2_length bytes" \
  "$NBDCOW" check --repair "$ov"
expect_exit 0 "no errors found" "$NBDCOW" check "$ov"

# What a crash leaves is harmless, reported, and tidied by --repair:
# data written past the last slot.
cp "$tmp/good" "$ov"
"$PYTHON" "$tests/kept-format.py" header "$ov" flags=1
head -c $B /dev/urandom |
  dd of="$ov" bs=$B seek=$(( data_offset / B + 70 )) conv=notrunc 2>/dev/null
expect_exit 0 "$ov: $B bytes of data outside the overlay's blocks" \
  "$NBDCOW" check "$ov"
grep -q "not closed cleanly" "$tmp/out" || fail "crash flag not reported"
expect_exit 0 "$ov: repaired: data outside the overlay's blocks punched" \
  "$NBDCOW" check --repair "$ov"
expect_exit 0 "no errors found" "$NBDCOW" check "$ov"
grep -q "not closed cleanly\|bytes of data" "$tmp/out" && fail "not tidied"
jq -e '.closed_cleanly == true and .recoveries == 1' \
  <("$NBDCOW" info --json "$ov") >/dev/null || fail "info after repair"

# The repaired file serves every flushed write.
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "
assert h.pread($B, 2 * $B) == b'x' * $B
assert h.pread($B, 40 * $B) == b'y' * $B
with open('$tmp/base', 'rb') as f:
    f.seek(70 * $B)
    assert h.pread($B, 70 * $B) == f.read($B), 'garbage of a crash read back'
"
