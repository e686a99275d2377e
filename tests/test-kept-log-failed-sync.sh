#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A flush whose record's sync fails (EIO, tests/overlay-faults.c) fails,
# and the record it wrote never counts: the next flush that writes the
# pages empties the log past it, so that after a clean stop the log
# holds nothing to replay, and nbdcow check finds the file sound.
# (The record, of the sequence the emptied log began with, read as
# that lap's first record before.)
. "$abs_top_srcdir/tests/functions.sh"

shim=$abs_top_builddir/tests/.libs/overlay-faults.so
[ -f "$shim" ] || fail "no $shim"
B=65536
ov=$tmp/ov
head -c $(( 512 * B )) /dev/urandom > "$tmp/base"
NBDKIT_PRELOAD="$shim" COW_FAULT_FILE="$tmp/faults" COW_FAULT_RATE=100 \
  COW_FAULT_SYNCS=1 COW_FAULT_MATCH="$ov" \
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
  cow-block-size=$B
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "
import os
h.pwrite(b'a' * $B, $B)
open('$tmp/faults', 'w').close()
try:
    h.flush()
    raise AssertionError('the flush whose sync failed succeeded')
except nbd.Error:
    pass
os.unlink('$tmp/faults')
# More than a record holds: the flush writes the pages.
for b in range(2, 300):
    h.pwrite(b'b' * 4096, b * $B)
h.flush()
"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
"$NBDCOW" info --json "$ov" |
  jq -e '.log.records == 0 and .log.blocks_to_drop == 0 and .closed_cleanly' \
  >/dev/null || fail "after a clean stop: $("$NBDCOW" info --json "$ov")"
"$NBDCOW" check "$ov" >/dev/null || fail "nbdcow check: $("$NBDCOW" check "$ov")"
echo "a record whose sync failed is never read"
