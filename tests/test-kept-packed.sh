#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A kept overlay packs its blocks (format version 3): the file holds
# its header, states and one slot per block in the overlay, nothing
# for the rest of the base.  A slot given up by a trim is not taken
# again while the file is open (a read racing the trim may still look
# there) but is after a restart, filling the hole; the disk's short
# last block has a slot like any other; a clean stop cuts the file
# after its last slot; commit --empty cuts the data off whole.  Every block reads back what was written at each step.
. "$abs_top_srcdir/tests/functions.sh"

B=65536
size=$(( 64 * 1024 * 1024 + 1000 ))     # 1025 blocks, the last short
make_base "$tmp/base" "$size"
ov=$tmp/ov
uri="nbd+unix:///?socket=$tmp/sock"
last=$(( size / B ))            # the short block

# step CODE: runs CODE in nbdsh against a fresh server of the overlay,
# after checking every block against the model kept in $tmp/model.
step ()
{
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
  nbdsh -u "$uri" -c "
import json, os
B, size, last = $B, $size, $last
model = json.load(open('$tmp/model')) if os.path.exists('$tmp/model') else {}
base = open('$tmp/base', 'rb')
def block(b):
    n = min(B, size - b * B)
    base.seek(b * B)
    want = base.read(n)
    if str(b) in model:
        want = bytes(model[str(b)]) if isinstance(model[str(b)], list) else \
               bytes([model[str(b)]]) * n
    return n, want
for b in range(last + 1):
    n, want = block(b)
    assert h.pread(n, b * B) == want, 'block %d reads wrong' % b
def put(b, value):
    n = min(B, size - b * B)
    h.pwrite(bytes([value]) * n, b * B)
    model[str(b)] = value
def trim(b):
    h.zero(min(B, size - b * B), b * B)
    model[str(b)] = 0
$1
h.flush()
json.dump(model, open('$tmp/model', 'w'))
"
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
  rm -f "$tmp/sock"
}
length_is ()
{
  got=$(stat -c %s "$ov")
  [ "$got" -eq "$1" ] || fail "$2: the file is $got bytes, not $1"
}

# 16 scattered blocks and the short last one: 17 slots.
step "
for i in range(16):
    put(i * 61 % last, i + 1)
put(last, 99)
"
# The data area's offset, from the header (docs/overlay-format.md).
data_offset=$(od -An -tu8 -j48 -N8 "$ov" | tr -d ' ')
# The file, extended ahead of its slots while served, ends after the
# last one (the short block's) once the server stops.
length_is $(( data_offset + 17 * B )) "17 blocks"
"$NBDCOW" check "$ov"

# Trim 8 of them and write 8 new ones: the 8 new blocks go past the end.
step "
for i in range(8):
    trim(i * 61 % last)
for i in range(8):
    put(500 + i, 50 + i)
"
length_is $(( data_offset + 25 * B )) "slots given up are not taken again"
bytes=$(stat -c %b "$ov")
[ $(( bytes * 512 )) -le $(( data_offset + 18 * B )) ] ||
  fail "the slots of trimmed blocks still take space: $(( bytes * 512 ))"

# After a restart the 8 holes are taken first: the file does not grow.
step "
for i in range(8):
    put(700 + i, 70 + i)
"
length_is $(( data_offset + 25 * B )) "holes filled after a restart"
jq -e '.blocks.overlay == 25 and .blocks.zero == 8' \
  <("$NBDCOW" info --json "$ov") >/dev/null || fail "info"
step ""

# commit --empty leaves the header and the states alone.
cp "$tmp/base" "$tmp/target"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdcopy "$uri" "$tmp/live.img"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"
"$NBDCOW" commit --empty "$ov" "$tmp/target"
cmp "$tmp/target" "$tmp/live.img" || fail "the committed base differs"
length_is $data_offset "after commit --empty"
"$NBDCOW" check "$ov"
