#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A write covering part of a block over a hole of the base (the plugin's
# extents say it reads as zeros) does not read the base: with every
# plugin read failing (nbdkit's error filter below ours), partial writes
# and zeroes into holes succeed and read back over zeros, while a
# partial write over data still fails with EIO.  A plugin without
# extents is read as before.  One extents call answers for many blocks
# (nbdkit's log filter below ours counts the calls).
. "$abs_top_srcdir/tests/functions.sh"

# Base: data in block 0, a hole after it.
head -c 65536 /dev/urandom > "$tmp/base"
truncate -s 1M "$tmp/base"
touch "$tmp/inject"
errors="error-pread=EIO error-pread-rate=100% error-pread-file=$tmp/inject"

start_nbdkit "$tmp/sock" --filter=cow --filter=error file "$tmp/base" \
  $errors
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "$EXPECT_EIO" -c '
h.pwrite(b"y" * 100, 3 * 65536 + 7)
h.zero(65536, 5 * 65536 + 1000, nbd.CMD_FLAG_NO_HOLE)
assert h.pread(65536, 3 * 65536) == bytes(7) + b"y" * 100 + bytes(65429)
assert h.pread(65536, 5 * 65536) == bytes(65536)
expect_eio("partial write over data", lambda: h.pwrite(b"z" * 100, 7))
'

start_nbdkit "$tmp/sock2" --filter=cow --filter=noextents --filter=error \
  file "$tmp/base" $errors
nbdsh -u "nbd+unix:///?socket=$tmp/sock2" -c "$EXPECT_EIO" \
  -c 'expect_eio("partial write over a hole the plugin does not report",
                lambda: h.pwrite(b"y" * 100, 3 * 65536 + 7))'

# Eight blocks in the hole, one extents call; block 0 is outside that
# window (it starts at block 3), so one more, then its read.
start_nbdkit "$tmp/sock3" --filter=cow --filter=log file "$tmp/base" \
  logfile="$tmp/log"
nbdsh -u "nbd+unix:///?socket=$tmp/sock3" -c '
for b in range(3, 11):
    h.pwrite(b"y" * 100, b * 65536 + 7)
h.pwrite(b"z" * 100, 7)
'
calls=$(grep -c ' Extents id=' "$tmp/log")
reads=$(grep -c ' Read id=' "$tmp/log")
[ "$calls" = 2 ] && [ "$reads" = 1 ] ||
  fail "expected 2 extents calls and 1 read, got $calls and $reads: $(cat "$tmp/log")"
