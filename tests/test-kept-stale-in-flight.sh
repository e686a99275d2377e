#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A flush's record clears MARKS_STALE (format version 9) only when no
# change was in flight while it was taken.  Over a slow base (nbdkit's
# delay filter below ours), a write into a block held in part before
# the checkpoint, which changes a held unit in place and completes
# another from the base, waits in its base read; meanwhile another
# connection writes new space and flushes, and the write completes.
# nbdkit is killed at once: the change made in place has no mark in
# the file, so the file must still be marked stale, and `map --since`
# must count the block (it counts the whole overlay).
. "$abs_top_srcdir/tests/functions.sh"
requires_filter delay

B=65536
ov=$tmp/ov
head -c $(( 16 * B )) /dev/urandom > "$tmp/base"
start_nbdkit "$tmp/sock" --filter=cow --filter=delay file "$tmp/base" \
  cow-file="$ov" cow-block-size=$B cow-control="$tmp/ctl" delay-read=2
uri="nbd+unix:///?socket=$tmp/sock"
# Block 0 held in part: its first unit (4K) only.
nbdsh -u "$uri" -c 'h.pwrite(b"a" * 4096, 0); h.flush()'
"$NBDCOW" checkpoint create "$tmp/ctl" "" held >/dev/null
nbdsh -c "
import os, signal, time
slow, fast = nbd.NBD(), nbd.NBD()
slow.connect_uri('$uri')
fast.connect_uri('$uri')
# Units 0 (held: in place) and 1 (its last 3K from the base: slow).
cookie = slow.aio_pwrite(b'w' * 2048, 3072)
time.sleep(0.5)
fast.pwrite(b'n' * 4096, 5 * $B)
fast.flush()
while not slow.aio_command_completed(cookie):
    slow.poll(-1)
os.kill(int(open('$tmp/sock.pid').read()), signal.SIGKILL)
"
pid=$(cat "$tmp/sock.pid")
while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
"$NBDCOW" map --json --since=held "$ov" > "$tmp/map" ||
  fail "nbdcow map: $(cat "$tmp/map")"
jq -e '[.[] | select(.state == "overlay" and .offset == 0)] | length == 1' \
  "$tmp/map" >/dev/null ||
  fail "the block changed in place while a record was taken is not counted: $(cat "$tmp/map")"
echo "a record taken while a change was in flight leaves the file stale"
