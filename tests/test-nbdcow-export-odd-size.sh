#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow export --since=CP --base=PREV takes as PREV a qcow2 image of
# the disk's size rounded up to 512, as qemu-img and nbdcow export give
# a disk of 1,000,000 bytes: the chain full, then increment, reads as
# the disk.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 1000000 "$tmp/disk.img"
ov=$tmp/o.cow ctl=$tmp/ctl uri="nbd+unix:///?socket=$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/disk.img" cow-file="$ov" \
  cow-control="$ctl"
nbdsh -u "$uri" -c 'h.pwrite(b"a" * 512, 0); h.flush()'
"$NBDCOW" checkpoint create "$ctl" "" c1
nbdsh -u "$uri" -c 'h.pwrite(b"b" * 512, 999000); h.flush()'
nbdcopy "$uri" "$tmp/want"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
(cd "$tmp" &&
 "$NBDCOW" export o.cow --base=disk.img full.qcow2 &&
 qemu-img create -q -f qcow2 -b full.qcow2 -F qcow2 byqemu.qcow2 &&
 "$NBDCOW" export --since=c1 o.cow --base=full.qcow2 inc.qcow2 &&
 "$NBDCOW" export --since=c1 o.cow --base=byqemu.qcow2 inc2.qcow2) ||
  fail "an export over a qcow2 base of the rounded size was refused"
qemu-img compare -q "$tmp/inc.qcow2" "$tmp/want" || fail "the chain reads wrong"
qemu-img compare -q "$tmp/inc2.qcow2" "$tmp/want" || fail "the chain over qemu-img's reads wrong"
