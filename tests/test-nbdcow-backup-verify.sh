#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow backup verify checks every file of a backup's chain against
# the checksums each stored when it was made: a chain as written is
# sound (exit 0, each file said so), pruned too; a bit flipped in a
# data cluster of any file, in its checksums' table, or in its tables
# (an L1 entry; an L2 entry's zero flag, which leaves the structure
# valid), in its header's fields, or a backing file replaced by another
# backup of the chain is found and named by file and offset (exit 2); a
# missing backing file is named, with the file that names it (exit 3).
. "$abs_top_srcdir/tests/functions.sh"

uri="nbd+unix:///?socket=$tmp/sock"
make_base "$tmp/base" $(( 8 * 1024 * 1024 ))
serve_views cow-file="$tmp/ov.cow"
mkdir "$tmp/b"
for d in 1 2 3; do
  nbdsh -u "$uri" -c "h.pwrite(b'$d' * 5 * 65536, $d * 1048576 + 4096)"
  backup_day "$d"
done
"$NBDCOW" backup verify "$tmp/b/3.qcow2" > "$tmp/said" ||
  fail "a chain as written: $(cat "$tmp/said")"
[ "$(grep -c ": sound: [1-9][0-9]* data clusters match" "$tmp/said")" -eq 3 ] ||
  fail "verify did not say each file sound: $(cat "$tmp/said")"
grep -q "a chain of 3 backups, every one sound" "$tmp/said" ||
  fail "verify said: $(cat "$tmp/said")"
echo "a chain as written verifies"

# data_at FILE: the offset in FILE of its first data cluster.
data_at () {
  qemu-img map --output=json "$1" |
    jq '[.[] | select(.data and .depth == 0)][0].offset'
}
# expect_damage FILE WHAT: verify of 3.qcow2 exits 2 naming FILE and WHAT.
expect_damage () {
  local status=0
  "$NBDCOW" backup verify "$tmp/b/3.qcow2" >/dev/null 2>"$tmp/err" ||
    status=$?
  [ "$status" -eq 2 ] || fail "$2: verify exited $status: $(cat "$tmp/err")"
  grep -q "$1: damaged: .*$2" "$tmp/err" ||
    fail "verify did not name $1 and $2: $(cat "$tmp/err")"
}

for f in 1 2 3; do
  cp "$tmp/b/$f.qcow2" "$tmp/saved"
  at=$(( $(data_at "$tmp/b/$f.qcow2") + 12345 ))
  flip_bit "$tmp/b/$f.qcow2" "$at"
  expect_damage "$f.qcow2" "data cluster at offset $(( at / 65536 * 65536 ))"
  cp "$tmp/saved" "$tmp/b/$f.qcow2"
done
echo "a bit flipped in any file's data is found and named"

cp "$tmp/b/2.qcow2" "$tmp/saved"
sums=$("$PYTHON" -c '
import sys
data = open(sys.argv[1], "rb").read(65536)
at = data.find(b"nbcs")
print(int.from_bytes(data[at + 8:at + 16], "big"))' "$tmp/b/2.qcow2")
flip_bit "$tmp/b/2.qcow2" $(( sums + 2 ))
expect_damage 2.qcow2 "checksums' table at offset $sums"
cp "$tmp/saved" "$tmp/b/2.qcow2"
l1=$(od -An -tx1 -j40 -N8 "$tmp/b/2.qcow2" | tr -d ' \n')
flip_bit "$tmp/b/2.qcow2" $(( 0x$l1 + 3 ))
expect_damage 2.qcow2 "tables from offset 65536"
cp "$tmp/saved" "$tmp/b/2.qcow2"
# The zero flag set on an entry the increment leaves to its backing
# file: the structure stays valid, the restore changes.
qemu-img convert -O raw "$tmp/b/2.qcow2" "$tmp/r2.raw"
l2=$(od -An -tx1 -j$(( 0x$l1 )) -N8 "$tmp/b/2.qcow2" | tr -d ' \n')
flip_bit "$tmp/b/2.qcow2" $(( (0x$l2 & 0xfffffffffe00) + 100 * 8 + 7 )) 0x01
status=0
qemu-img compare -q -f qcow2 -F raw "$tmp/b/2.qcow2" "$tmp/r2.raw" ||
  status=$?
[ "$status" -eq 1 ] ||
  fail "the zero flag set: the chain restores alike (compare: $status)"
expect_damage 2.qcow2 "tables from offset 65536"
cp "$tmp/saved" "$tmp/b/2.qcow2"
echo "a bit flipped in a checksums' table, an L1 or an L2 entry is found"

cp "$tmp/b/3.qcow2" "$tmp/saved"
flip_bit "$tmp/b/3.qcow2" 99 0x01             # refcount_order
expect_damage 3.qcow2 "header at offset 0"
cp "$tmp/saved" "$tmp/b/3.qcow2"
cp "$tmp/b/2.qcow2" "$tmp/saved"
cp "$tmp/b/1.qcow2" "$tmp/b/2.qcow2"      # another backup of the chain
status=0
"$NBDCOW" backup verify "$tmp/b/3.qcow2" >/dev/null 2>"$tmp/err" || status=$?
[ "$status" -eq 2 ] &&
  grep -q "3.qcow2: its backing file .*2.qcow2 is not the backup it was made over" \
    "$tmp/err" || fail "a backing file replaced: exit $status: $(cat "$tmp/err")"
cp "$tmp/saved" "$tmp/b/2.qcow2"
cp "$tmp/b/1.qcow2" "$tmp/saved"
length=$(stat -c %s "$tmp/b/1.qcow2")
truncate -s $(( length - 4096 )) "$tmp/b/1.qcow2"
expect_damage 1.qcow2 "file of $(( length - 4096 )) bytes, its record says $length (cut short?)"
cp "$tmp/saved" "$tmp/b/1.qcow2"
head -c 4096 /dev/urandom >> "$tmp/b/1.qcow2"
expect_damage 1.qcow2 "file of $(( length + 4096 )) bytes, its record says $length (bytes appended"
cp "$tmp/saved" "$tmp/b/1.qcow2"
echo "a header field changed, a backing file replaced by another backup, a file cut short or grown, is found"

mv "$tmp/b/1.qcow2" "$tmp/gone"
status=0
"$NBDCOW" backup verify "$tmp/b/3.qcow2" >/dev/null 2>"$tmp/err" || status=$?
[ "$status" -eq 3 ] && grep -q "2.qcow2: its backing file 1.qcow2: " "$tmp/err" &&
  ! grep -q -- "--base" "$tmp/err" ||
  fail "a missing backing file: exit $status: $(cat "$tmp/err")"
mv "$tmp/gone" "$tmp/b/1.qcow2"
"$NBDCOW" backup prune --keep=2 "$tmp/b/3.qcow2" >/dev/null
"$NBDCOW" backup verify "$tmp/b/3.qcow2" > "$tmp/said" ||
  fail "a pruned chain: $(cat "$tmp/said")"
grep -q "a chain of 2 backups, every one sound" "$tmp/said" ||
  fail "verify of a pruned chain said: $(cat "$tmp/said")"
echo "a missing backing file is named; a pruned chain verifies"
