#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# One flipped byte in the newest copy of a kept overlay's checkpoint
# table, in a file closed cleanly (where no crash tore it): the older
# copy may name a checkpoint deleted since (c1 here, deleted before
# block 2 was written), so damage is reported and every block of the
# overlay counts as changed since each checkpoint.  nbdcow check says
# so (exit 2); nbdkit says so and serves the file, its first flush
# writing the copy again; check --repair writes it again from the
# other; a backup over c1 then restores the disk exactly.
. "$abs_top_srcdir/tests/functions.sh"

B=65536
ov=$tmp/ov
ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
head -c $(( 16 * B )) /dev/urandom > "$tmp/base"
cd "$tmp"
serve ()
{
  rm -f "$tmp/sock" "$ctl"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
    cow-control="$ctl" cow-view-separator=@ cow-changes-separator=+
}
stop () { stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"; }
since_c1 ()
{
  "$NBDCOW" map --json --since=c1 "$ov" |
    jq -c '[.[] | select(.state != "base") | [.offset, .length]]'
}

# damaged_file: c1 backed up, deleted, block 2 written, a clean stop,
# then a byte of the newest copy of the table flipped; sets copy to its
# number (1 or 2).
damaged_file ()
{
  rm -f "$ov" c1.qcow2
  serve
  nbdsh -u "$uri" -c "h.pwrite(b'a' * $B, 0)"
  "$NBDCOW" backup "$ctl" "$uri" c1 c1.qcow2 >/dev/null
  "$NBDCOW" checkpoint delete "$ctl" "" c1
  nbdsh -u "$uri" -c "h.pwrite(b'b' * $B, 2 * $B)"
  stop
  [ -z "$("$NBDCOW" info --json "$ov" | jq -r '.checkpoints[].name')" ] ||
    fail "c1 not deleted"
  copy=$("$PYTHON" - "$ov" <<'PY'
import struct, sys
with open(sys.argv[1], 'r+b') as f:
    f.seek(8192)
    copies = f.read(2 * 4096)
    seq = [struct.unpack_from('<Q', copies, 4096 * i + 8)[0] for i in (0, 1)]
    newest = seq.index(max(seq))
    f.seek(8192 + 4096 * newest + 1000)
    f.write(b'\xff')
print(newest + 1)
PY
)
}

damaged_file
expect_exit 2 "damaged: copy $copy of the checkpoint table" "$NBDCOW" check "$ov"
[ "$("$NBDCOW" info --json "$ov" | jq .marks_exact)" = false ] ||
  fail "nbdcow info takes the marks for exact"
[ "$(since_c1)" = "[[0,$B],[$(( 2 * B )),$B]]" ] ||
  fail "map --since=c1 with the table damaged: $(since_c1)"
serve
grep -q "copy $copy of the checkpoint table is damaged" "$tmp/sock.err" ||
  fail "nbdkit did not say the table is damaged"
"$NBDCOW" backup --base=c1.qcow2 "$ctl" "$uri" c2 c2.qcow2 >/dev/null
qemu-img compare -q c2.qcow2 "$uri" || fail "the increment over c1 is not the disk"
stop
"$NBDCOW" check "$ov" > check.out ||
  fail "after nbdkit's flush, nbdcow check: $(cat check.out)"
echo "a damaged copy of the table: reported, every block changed, mended by a flush"

damaged_file
"$NBDCOW" check --repair "$ov" > check.out ||
  fail "check --repair: $(cat check.out)"
grep -q "repaired: the checkpoint table" check.out ||
  fail "check --repair said: $(cat check.out)"
"$NBDCOW" check "$ov" > check.out || fail "after --repair: $(cat check.out)"
[ "$(since_c1)" = "[[0,$B],[$(( 2 * B )),$B]]" ] ||
  fail "map --since=c1 after --repair: $(since_c1)"
echo "check --repair writes the copy again, the marks kept inexact"
