#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A flush of a kept overlay whose sync fails (EIO, tests/overlay-faults.c)
# fails, and leaves what it did not make durable to the next flush:
# once a later flush succeeds, every write completed before it reads
# back after kill -9, the states of the blocks it took among them.
# Both ways a flush goes: a record of the log (a few blocks), and the
# state pages (more blocks than a record holds).
. "$abs_top_srcdir/tests/functions.sh"

shim=$abs_top_builddir/tests/.libs/overlay-faults.so
[ -f "$shim" ] || fail "no $shim"
M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 32 * M ))
uri="nbd+unix:///?socket=$tmp/sock"
NBDKIT_PRELOAD="$shim" COW_FAULT_FILE="$tmp/fault" COW_FAULT_RATE=100 \
  COW_FAULT_SYNCS=1 COW_FAULT_MATCH="$tmp/ov.cow" \
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/ov.cow"
nbdsh -u "$uri" -c "
import os, sys
# New blocks, whose states the flushes must write.
for i in range(8):
    h.pwrite(bytes([0x41 + i]) * 65536, i * $M)
# Held in part: more blocks than a record of the log holds (256), so
# that the flushes write the state pages.
for b in range(128, 128 + 300):
    h.pwrite(bytes([b % 251]) * 4096, b * 65536 + 8192)
open('$tmp/fault', 'w').close()
try:
    h.flush()
    sys.exit('a flush whose sync failed succeeded')
except nbd.Error as e:
    assert e.errno == 'EIO', e
os.unlink('$tmp/fault')
h.flush()
" || fail "the flushes: see above"
pid=$(cat "$tmp/sock.pid")
kill -9 "$pid"
wait "$pid" 2>/dev/null || true         # its lock on the file gone with it
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/ov.cow"
nbdsh -u "$uri" -c "
for i in range(8):
    assert h.pread(65536, i * $M) == bytes([0x41 + i]) * 65536, i
for b in range(128, 128 + 300):
    assert h.pread(4096, b * 65536 + 8192) == bytes([b % 251]) * 4096, b
" || fail "a write flushed after a failed flush was lost"
