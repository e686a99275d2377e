#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow backup --compress writes qcow2 compressed clusters and keeps
# the record: a full backup and an increment over it, each smaller
# than the same uncompressed, each clean to qemu-img check and
# restoring byte for byte as qemu reads it; the next --base over a
# compressed backup works; verify inflates every cluster and names a
# flipped bit in a compressed one (exit 2); prune keeps the merged full
# compressed, its restore exact.
. "$abs_top_srcdir/tests/functions.sh"

ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
size=$(( 8 * 1024 * 1024 ))
head -c $(( size * 3 / 4 )) /dev/urandom | base64 -w0 > "$tmp/base"
serve_views cow-file="$tmp/ov.cow"
# The base compresses to about 3/4 (base64), writes over it compress
# well, and some random bytes not at all.
nbdsh -u "$uri" -c "h.pwrite(b'text of a file ' * 30000, 65536 * 3 + 100)"
nbdsh -u "$uri" -c "import os; h.pwrite(os.urandom(3 * 65536), 65536 * 90)"
# Clusters that compress well between clusters that do not.
nbdsh -u "$uri" -c "
import os
for c in range(64):
    h.pwrite(os.urandom(65536) if c % 2 else b'%d' % c * 30000, (c + 12) * 65536)"
mkdir "$tmp/b" "$tmp/plain"

# compressed FILE: the offset of the first compressed cluster's data in
# FILE, as its first L2 table maps it; fails if it maps none.
compressed () {
  "$PYTHON" - "$1" <<'PY'
import struct, sys
f = open(sys.argv[1], "rb")
h = f.read(48)
bits, l1_offset = struct.unpack(">I", h[20:24])[0], struct.unpack(">Q", h[40:48])[0]
f.seek(l1_offset)
l2 = struct.unpack(">Q", f.read(8))[0] & 0x00fffffffffffe00
f.seek(l2)
for (e,) in struct.iter_unpack(">Q", f.read(1 << bits)):
    if e >> 62 & 1:
        print(e & ((1 << (62 - (bits - 8))) - 1))
        sys.exit(0)
sys.exit(1)
PY
}
( cd "$tmp/b" && "$NBDCOW" backup --compress "$ctl" "$uri" d1 1.qcow2 ) \
  >/dev/null || fail "the full compressed backup failed"
nbdcopy "$uri" "$tmp/at1.raw"
nbdsh -u "$uri" -c "h.pwrite(b'a second day ' * 20000, 65536 * 70 + 7)"
( cd "$tmp/b" && "$NBDCOW" backup --compress --base=1.qcow2 "$ctl" "$uri" \
    d2 2.qcow2 ) >/dev/null || fail "the compressed increment failed"
nbdcopy "$uri" "$tmp/at2.raw"
( cd "$tmp/plain" &&
  "$NBDCOW" backup --keep-base-checkpoint "$ctl" "$uri" p plain.qcow2 ) \
  >/dev/null || fail "the uncompressed backup failed"

for f in 1 2; do
  qemu-img check "$tmp/b/$f.qcow2" >"$tmp/check" 2>&1 ||
    fail "qemu-img check $f.qcow2: $(cat "$tmp/check")"
  compressed "$tmp/b/$f.qcow2" >/dev/null ||
    fail "$f.qcow2 holds no compressed cluster"
  qemu-img convert -O raw "$tmp/b/$f.qcow2" "$tmp/restored"
  cmp "$tmp/restored" "$tmp/at$f.raw" || fail "$f.qcow2 restores wrong"
done
full=$(stat -c %s "$tmp/b/1.qcow2") plain=$(stat -c %s "$tmp/plain/plain.qcow2")
[ "$full" -lt "$plain" ] ||
  fail "the compressed full backup takes $full bytes, uncompressed $plain"
# As tight as qemu's own, but for the checksums' table and a cluster's
# rest a piece of 4 MiB: within a tenth.
qemu-img convert -c -O qcow2 "$tmp/at1.raw" "$tmp/qemu.qcow2"
qemu=$(stat -c %s "$tmp/qemu.qcow2")
[ "$full" -le $(( qemu * 11 / 10 )) ] ||
  fail "the compressed full backup takes $full bytes, qemu-img convert -c $qemu"
echo "compressed backups check clean and restore exact ($full bytes, $plain uncompressed, $qemu by qemu-img)"

"$NBDCOW" backup verify "$tmp/b/2.qcow2" > "$tmp/said" ||
  fail "verify of the compressed chain: $(cat "$tmp/said")"
at=$(compressed "$tmp/b/1.qcow2")
cp "$tmp/b/1.qcow2" "$tmp/saved"
flip_bit "$tmp/b/1.qcow2" $(( at + 40 ))
status=0
"$NBDCOW" backup verify "$tmp/b/2.qcow2" >/dev/null 2>"$tmp/err" || status=$?
[ "$status" -eq 2 ] &&
  grep -q "1.qcow2: damaged: \(compressed\|data\) cluster at offset" "$tmp/err" ||
  fail "a flipped bit in a compressed cluster: exit $status: $(cat "$tmp/err")"
cp "$tmp/saved" "$tmp/b/1.qcow2"
echo "verify inflates each cluster and names a flipped bit"

nbdsh -u "$uri" -c "h.pwrite(b'third ' * 10000, 65536 * 20)"
( cd "$tmp/b" && "$NBDCOW" backup --compress --base=2.qcow2 "$ctl" "$uri" \
    d3 3.qcow2 ) >/dev/null || fail "an increment over a compressed one failed"
nbdcopy "$uri" "$tmp/at3.raw"
"$NBDCOW" backup prune --keep=2 "$tmp/b/3.qcow2" >/dev/null ||
  fail "prune of the compressed chain failed"
[ ! -e "$tmp/b/1.qcow2" ] || fail "prune left 1.qcow2"
compressed "$tmp/b/2.qcow2" >/dev/null ||
  fail "prune made the full 2.qcow2 uncompressed"
for f in 2 3; do
  qemu-img convert -O raw "$tmp/b/$f.qcow2" "$tmp/restored"
  cmp "$tmp/restored" "$tmp/at$f.raw" || fail "$f.qcow2 restores wrong after prune"
done
"$NBDCOW" backup verify "$tmp/b/3.qcow2" >/dev/null ||
  fail "the pruned compressed chain does not verify"
echo "prune keeps the full compressed and every restore exact"
