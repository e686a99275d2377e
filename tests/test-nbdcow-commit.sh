#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow commit writes a kept overlay into a copy of its base, a file
# or an NBD export (nbdkit, or qemu-nbd with multi-conn), so that the
# copy reads as clients saw the disk; a target of another size or a
# read-only one is refused; an interrupted commit run again ends the
# same; --empty leaves base and overlay reading the same disk.
. "$abs_top_srcdir/tests/functions.sh"
. "$tests/nbdcow-setup.sh"

# A file.
cp "$tmp/base" "$tmp/t1"
"$NBDCOW" commit "$ov" "$tmp/t1" | tee "$tmp/out"
grep -q "over 4 connections" "$tmp/out" || fail "not 4 threads on a file"
cmp "$tmp/live.img" "$tmp/t1" || fail "commit into a file"

# nbdkit's file plugin, which advertises multi-conn.
cp "$tmp/base" "$tmp/t2"
start_nbdkit "$tmp/s2" file "$tmp/t2"
"$NBDCOW" commit --connections=3 "$ov" "nbd+unix:///?socket=$tmp/s2" |
  tee "$tmp/out"
grep -q "over 3 connections" "$tmp/out" || fail "not 3 connections"
nbdcopy "nbd+unix:///?socket=$tmp/s2" "$tmp/t2.img"
cmp "$tmp/live.img" "$tmp/t2.img" || fail "commit into nbdkit"

# qemu-nbd serving the copy.
cp "$tmp/base" "$tmp/t3"
qemu-nbd -f raw --shared=4 --persistent --socket="$tmp/s3" "$tmp/t3" &
on_exit "kill $! 2>/dev/null"
for _ in $(seq 100); do [ -S "$tmp/s3" ] && break; sleep 0.1; done
"$NBDCOW" commit "$ov" "nbd+unix:///?socket=$tmp/s3"
nbdcopy "nbd+unix:///?socket=$tmp/s3" "$tmp/t3.img"
cmp "$tmp/live.img" "$tmp/t3.img" || fail "commit into qemu-nbd"

# Refused targets: exit 1, the target named.
truncate -s 1M "$tmp/small"
expect_exit 1 "$tmp/small: 1048576 bytes, but the base of $ov has $((128 * B)): not a copy of its base" \
  "$NBDCOW" commit "$ov" "$tmp/small"
start_nbdkit "$tmp/s4" -r file "$tmp/t1"
expect_exit 1 "socket=$tmp/s4: the NBD export is read-only" \
  "$NBDCOW" commit "$ov" "nbd+unix:///?socket=$tmp/s4"
expect_exit 1 "$tmp/none: No such file or directory" \
  "$NBDCOW" commit "$ov" "$tmp/none"
qemu-img create -q -f qcow2 "$tmp/t.qcow2" $((128 * B))
expect_exit 1 "$tmp/t.qcow2: a qcow2 image, which nbdcow writes only over NBD: serve it \(qemu-nbd -f qcow2" \
  "$NBDCOW" commit "$ov" "$tmp/t.qcow2"
ln -s "$ov" "$tmp/ov-link"
expect_exit 1 "$tmp/ov-link: this is the overlay itself: commit into a copy of its base" \
  "$NBDCOW" commit "$ov" "$tmp/ov-link"
expect_exit 1 "expected FILE and TARGET" "$NBDCOW" commit "$ov"
expect_exit 1 "--connections=x: must be a number from 1 to 64" \
  "$NBDCOW" commit --connections=x "$ov" "$tmp/t1"

# Killed in the middle of a commit into a slow target, then run again.
cp "$tmp/base" "$tmp/t5"
start_nbdkit "$tmp/s5" --filter=delay file "$tmp/t5" delay-write=300ms delay-zero=300ms
"$NBDCOW" commit "$ov" "nbd+unix:///?socket=$tmp/s5" &
# Killed once the first pieces have landed (however slow nbdkit is,
# under valgrind say), with the rest still in the delay filter.
for _ in $(seq 600); do
  cmp -s "$tmp/base" "$tmp/t5" || break
  sleep 0.05
done
kill -9 $!
wait $! 2>/dev/null || true
stop_nbdkit "$(cat "$tmp/s5.pid")" "$tmp/s5.err"
cmp -s "$tmp/live.img" "$tmp/t5" && fail "the commit was not interrupted"
cmp -s "$tmp/base" "$tmp/t5" && fail "the commit had not started"
"$NBDCOW" commit "$ov" "$tmp/t5"
cmp "$tmp/live.img" "$tmp/t5" || fail "the commit run again"

# --empty: the overlay is empty afterwards, and the committed base
# through it reads as before.
cp "$tmp/base" "$tmp/t6"
"$NBDCOW" commit --empty "$ov" "$tmp/t6" | grep -q "the overlay is empty now" ||
  fail "--empty did not say so"
jq -e '.blocks.overlay == 0 and .blocks.zero == 0 and .closed_cleanly' \
  <("$NBDCOW" info --json "$ov") >/dev/null || fail "overlay not empty"
[ "$(jq .bytes_on_disk <("$NBDCOW" info --json "$ov"))" -le $((64 * 1024)) ] ||
  fail "the emptied overlay keeps its data"
view_of "$tmp/t6"
cmp "$tmp/live.img" "$tmp/view.img" || fail "base and overlay after --empty"
