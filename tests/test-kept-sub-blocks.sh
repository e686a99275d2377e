#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A kept overlay holds blocks in part (format version 5 on): small writes
# into blocks of 16K, 64K and 4M, the disk's short last block among
# them, read back exactly after a restart; nbdcow info counts only the
# sub-blocks written, map lists them, export writes them as qcow2
# subclusters that qemu-img checks and reads as the live view, and
# commit writes them alone.  At 64K, a checkpoint: map --since and
# export --since hold the blocks written after it, only their
# sub-blocks written.  At 8K blocks the file keeps whole blocks.
. "$abs_top_srcdir/tests/functions.sh"

ov=$tmp/ov
ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
serve ()
{
  rm -f "$tmp/sock" "$ctl"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
    cow-block-size="$B" cow-control="$ctl"
}
stop () { stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"; }
# A base of data throughout: a block of zeros in the base is written
# whole, as the rest of it costs no read.
random_base () { head -c "$1" /dev/urandom > "$tmp/base"; }

# writes SEED: small writes all over the disk, flushed; the sub-blocks
# of the block size they touch are added to $tmp/held (one offset a
# line), the blocks they touch are $tmp/written.
writes ()
{
  nbdsh -u "$uri" -c "
import random
r = random.Random($1)
size, B = h.get_size(), $B
part = max(4096, B // 32)
held = set(int(l) for l in open('$tmp/held')) if $1 > 1 else set()
written = set()
for i in range(24):
    n = r.choice([1, 512, 4096, 8292])
    off = size - n if i == 0 else r.randrange(size - n)
    h.pwrite(bytes([r.randrange(1, 256)]) * n, off)
    held.update(range(off // part * part, off + n, part))
    written.update(range(off // B, (off + n - 1) // B + 1))
h.flush()
open('$tmp/held', 'w').write(''.join('%d\n' % p for p in sorted(held)))
open('$tmp/written', 'w').write(''.join('%d\n' % b for b in written))
"
}

# held_bytes: the bytes of the disk in the sub-blocks written.
held_bytes ()
{
  "$PYTHON" -c "
size, part = $size, max(4096, $B // 32)
print(sum(min(part, size - p) for p in map(int, open('$tmp/held'))))"
}

# map_is_held: the runs nbdcow map lists as overlay are the sub-blocks
# written, merged.
map_is_held ()
{
  "$NBDCOW" map --json "$@" "$ov" | "$PYTHON" -c "
import json, sys
size, part = $size, max(4096, $B // 32)
want = set(map(int, open('$tmp/held')))
got = set()
for r in json.load(sys.stdin):
    if r['state'] == 'overlay':
        got.update(range(r['offset'], r['offset'] + r['length'], part))
assert got == want, (sorted(got - want), sorted(want - got))
" || fail "B=$B: nbdcow map $* lists other runs than the sub-blocks written"
}

# fresh_overlay: a new overlay of a new base of $size bytes holding
# the writes, served and stopped, what clients saw in $tmp/live.img.
fresh_overlay ()
{
  random_base "$size"
  rm -f "$ov"
  serve
  writes 1
  nbdcopy "$uri" "$tmp/live.img"
  stop
}

for B in 16384 65536 4194304; do
  size=$(( 2 * B + 5000 ))
  [ "$B" -lt 65536 ] && size=$(( 64 * B + 5000 ))
  fresh_overlay
  serve
  nbdcopy "$uri" "$tmp/again.img"
  stop
  cmp "$tmp/live.img" "$tmp/again.img" ||
    fail "B=$B: the disk after a restart is not the disk before"
  want=$(held_bytes)
  jq -e ".format_version == 9 and .blocks.partial > 0 and
         .data_bytes == $want and .complete == false" \
    <("$NBDCOW" info --json "$ov") >/dev/null ||
    fail "B=$B: info, not $want bytes: $("$NBDCOW" info --json "$ov")"
  map_is_held
  "$NBDCOW" check "$ov"

  "$NBDCOW" export "$ov" --base="$tmp/base" "$tmp/o.qcow2"
  qemu-img check "$tmp/o.qcow2" >/dev/null || fail "B=$B: qemu-img check"
  qemu-img info --output=json "$tmp/o.qcow2" |
    jq -e '.["format-specific"].data["extended-l2"] == true' >/dev/null ||
    fail "B=$B: the export has no subclusters"
  qemu-img compare -q "$tmp/o.qcow2" "$tmp/live.img" ||
    fail "B=$B: the export reads otherwise than the live view"
  cp "$tmp/base" "$tmp/target"
  "$NBDCOW" commit "$ov" "$tmp/target" >/dev/null
  cmp "$tmp/target" "$tmp/live.img" || fail "B=$B: the commit differs"
  echo "B=$B: $want bytes in sub-blocks, exact after a restart, in info, map, export and commit"
done

# A checkpoint at 64K: the blocks written after it, in part.
B=65536
size=$(( 2 * 1024 * 1024 + 5000 ))
random_base "$size"
rm -f "$ov"
serve
writes 1
"$NBDCOW" checkpoint create "$ctl" "" c1
nbdcopy "$uri" "$tmp/c1.img"
writes 2
mv "$tmp/held" "$tmp/held2"
nbdcopy "$uri" "$tmp/live.img"
stop
# The sub-blocks held, in the blocks written since c1.
"$PYTHON" -c "
B = $B
new = set(map(int, open('$tmp/held2')))
changed = set(map(int, open('$tmp/written')))
held = sorted(p for p in new if p // B in changed)
open('$tmp/held', 'w').write(''.join('%d\n' % p for p in held))
"
map_is_held --since=c1
qemu-img convert -f raw -O qcow2 "$tmp/c1.img" "$tmp/c1.qcow2"
"$NBDCOW" export --since=c1 "$ov" --base="$tmp/c1.qcow2" "$tmp/inc.qcow2"
qemu-img check "$tmp/inc.qcow2" >/dev/null || fail "export --since: qemu-img check"
qemu-img compare -q "$tmp/inc.qcow2" "$tmp/live.img" ||
  fail "export --since=c1 over the copy at c1 is not the live view"
echo "since c1: map and export hold the sub-blocks of the blocks changed"

# 8K blocks: no sub-blocks kept; the writes read the rest of the block.
B=8192
size=$(( 64 * B + 5000 ))
fresh_overlay
jq -e '.blocks.partial == 0' <("$NBDCOW" info --json "$ov") >/dev/null ||
  fail "B=8K: blocks held in part"
"$NBDCOW" export "$ov" --base="$tmp/base" "$tmp/o.qcow2"
qemu-img compare -q "$tmp/o.qcow2" "$tmp/live.img" || fail "B=8K: export"
echo "B=8K: whole blocks"
