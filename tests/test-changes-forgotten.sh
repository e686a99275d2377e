#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The man page's recipe for a diff of what clients changed cannot exit
# 0 with a wrong image: without cow-changes-separator=+ a name holding
# '+' is refused, with a message that says which parameter is missing,
# so qemu-img convert fails; with another separator '+' is an ordinary
# character again.  A checkpoint that does not exist is refused too.
. "$abs_top_srcdir/tests/functions.sh"

qemu-img create -q -f raw "$tmp/disk.img" 4M
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/disk.img"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c 'h.pwrite(b"w" * 65536, 1 << 20)'
expect_exit 1 'qemu-img' \
  qemu-img convert -f raw -O qcow2 -B "$tmp/disk.img" -F raw \
  "nbd+unix:///+?socket=$tmp/sock" "$tmp/diff.qcow2"
grep -q "export \"+\" is refused: a name with '+' reads what changed in an export only under cow-changes-separator=+" \
  "$tmp/sock.err" || fail "no message naming the parameter: $(cat "$tmp/sock.err")"
! nbdinfo --size "nbd+unix:///disk+c1?socket=$tmp/sock" >/dev/null 2>&1 ||
  fail "disk+c1 was served without cow-changes-separator"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# Another separator: '+' is an ordinary character.
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/disk.img" \
  cow-changes-separator=~ cow-control="$tmp/ctl"
nbdinfo --size "nbd+unix:///a+b?socket=$tmp/sock" >/dev/null ||
  fail "a+b refused under cow-changes-separator=~"
# With the view, a checkpoint that does not exist fails the recipe.
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c 'h.pwrite(b"w" * 65536, 1 << 20)'
expect_exit 1 'qemu-img' \
  qemu-img convert -f raw -O qcow2 -B "$tmp/disk.img" -F raw \
  "nbd+unix:///~nosuch?socket=$tmp/sock" "$tmp/diff.qcow2"
grep -q 'export "" has no checkpoint "nosuch"' "$tmp/sock.err" ||
  fail "no message naming the checkpoint: $(cat "$tmp/sock.err")"
# And the recipe itself is right.
qemu-img convert -f raw -O qcow2 -B "$tmp/disk.img" -F raw \
  "nbd+unix:///~?socket=$tmp/sock" "$tmp/diff.qcow2"
qemu-img compare -q "$tmp/diff.qcow2" "nbd+unix:///?socket=$tmp/sock" ||
  fail "the diff is not what clients saw"
