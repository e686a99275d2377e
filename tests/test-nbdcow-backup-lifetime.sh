#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow backup of a kept overlay under cow-lifetime=clients:0, with no
# client: the overlay ends with its last client, and so would the
# view, so the backup keeps a client on the export while it runs.  A
# full backup and an increment, each the disk.
. "$abs_top_srcdir/tests/functions.sh"

B=65536
head -c $(( 16 * B )) /dev/urandom > "$tmp/base"
ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
cd "$tmp"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/ov" \
  cow-lifetime=clients:0 cow-control="$ctl" cow-view-separator=@ \
  cow-changes-separator=+
nbdsh -u "$uri" -c "h.pwrite(b'a' * $B, 0)"
"$NBDCOW" backup "$ctl" "$uri" b1 full.qcow2 > out 2>&1 ||
  fail "the full backup: $(cat out)"
qemu-img compare -q full.qcow2 "$uri" || fail "the full backup is not the disk"
nbdsh -u "$uri" -c "h.pwrite(b'b' * $B, 3 * $B)"
"$NBDCOW" backup --base=full.qcow2 "$ctl" "$uri" b2 inc.qcow2 > out 2>&1 ||
  fail "the increment: $(cat out)"
qemu-img compare -q inc.qcow2 "$uri" || fail "the increment is not the disk"
echo "backups under cow-lifetime=clients:0 with no client: each the disk"
