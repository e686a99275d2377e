#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A zero allowed to trim that covers part of a block reading as zeros
# without being in the overlay (over a hole of the base, or zeroed
# before) leaves that block out of the overlay: it succeeds with the
# overlay full (cow-max-size: two blocks, each charged 16 bytes for
# the filesystem's map), the block stays a hole, and cow-stats
# counts no block allocated for it.  A partial zero over data, or one
# with NO_HOLE, still allocates its block.
. "$abs_top_srcdir/tests/functions.sh"

B=65536
# Base: data in block 0, a hole in blocks 1-15.
head -c $B /dev/urandom > "$tmp/base"
truncate -s $((16 * B)) "$tmp/base"
stats="$tmp/stats.json"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
  cow-max-size=$((2 * (B + 16))) cow-stats="$stats"
uri="nbd+unix:///?socket=$tmp/sock"

nbdsh -u "$uri" -c "
B = $B
base = open('$tmp/base', 'rb').read()
h.zero(10, 100)                       # over data: block 0 allocated
h.zero(100, 5 * B + 10, nbd.CMD_FLAG_NO_HOLE)   # block 5 allocated
try:
    h.pwrite(b'x' * 100, 7 * B)
    raise AssertionError('the overlay should be full')
except nbd.Error as e:
    assert e.errno == 'ENOSPC', e.errno
h.zero(4096, B + 100)                 # over the base's hole
h.zero(B, 2 * B)                      # whole block 2 zeroed
h.zero(1000, 2 * B + 7)               # part of a zeroed block
h.zero(100, 3 * B - 50)               # the end of 2, the start of 3
assert h.pread(B, 0) == base[:100] + bytes(10) + base[110:B]
assert h.pread(14 * B, B) == bytes(14 * B)
"
expect_extent "$uri" 0 data
expect_extent "$uri" $((B + 200)) "hole,zero"
expect_extent "$uri" $((2 * B)) "hole,zero"
expect_extent "$uri" $((3 * B)) "hole,zero"
expect_extent "$uri" $((5 * B)) data
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

blocks=$($PYTHON -c "
import json
print(json.load(open('$stats'))['exports'][0]['blocks'])")
[ "$blocks" = "{'base': 13, 'overlay': 2, 'zero': 1}" ] ||
  fail "blocks: $blocks"
