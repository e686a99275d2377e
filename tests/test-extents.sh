#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdinfo --map after writes, zeroes and trims: overlay data is data,
# zeroed or trimmed whole blocks are holes reading as zero, a zero
# without MAY_TRIM stays allocated, the rest is what the plugin says.
. "$abs_top_srcdir/tests/functions.sh"

K=1024 M=$(( 1024 * 1024 ))
# Base: data [0,1M), hole [1M,2M), data [2M,3M).
head -c "$M" /dev/urandom > "$tmp/base"
truncate -s $(( 2 * M )) "$tmp/base"
head -c "$M" /dev/urandom >> "$tmp/base"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-block-size=64K
uri="nbd+unix:///?socket=$tmp/sock"

expect_extent "$uri" 0 data
expect_extent "$uri" $(( M + 5 )) "hole,zero"

nbdsh -u "$uri" -c "
h.pwrite(b'x' * 4096, $M + 100)                       # into the hole
h.zero(128 * $K, 2 * $M)                              # may trim
h.zero(64 * $K, 2 * $M + 256 * $K, nbd.CMD_FLAG_NO_HOLE)
h.trim(128 * $K, 512 * $K)
h.trim(100, 768 * $K + 10)                            # partial: ignored
"
expect_extent "$uri" $(( M )) data                    # block written
expect_extent "$uri" $(( M + 64 * K )) "hole,zero"    # base hole after it
expect_extent "$uri" $(( 2 * M )) "hole,zero"         # zeroed, may trim
expect_extent "$uri" $(( 2 * M + 127 * K )) "hole,zero"
expect_extent "$uri" $(( 2 * M + 128 * K )) data      # base data
expect_extent "$uri" $(( 2 * M + 256 * K )) data      # zero, no hole
expect_extent "$uri" $(( 512 * K )) "hole,zero"       # trimmed
expect_extent "$uri" $(( 640 * K )) data              # base data again
expect_extent "$uri" $(( 768 * K )) data              # partial trim

nbdsh -u "$uri" -c "
assert h.pread(4096, $M + 100) == b'x' * 4096
assert h.pread(128 * $K, 2 * $M) == bytes(128 * $K)
assert h.pread(64 * $K, 2 * $M + 256 * $K) == bytes(64 * $K)
assert h.pread(128 * $K, 512 * $K) == bytes(128 * $K)
"
