#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A failing plugin read (nbdkit's error filter below ours) returns the
# error to the client and changes no block state: the read-modify-write
# of an unaligned write, a cow-on-read copy-up and a cow-on-cache
# copy-up all fail cleanly, and once errors stop the blocks read as the
# base again and can be written.
. "$abs_top_srcdir/tests/functions.sh"

# Data in block 1 only: a write into a hole of the base reads nothing
# from it (tests/test-rmw-hole.sh), so the failing rmw needs data.
truncate -s 10M "$tmp/base"
head -c 65536 /dev/urandom |
  dd of="$tmp/base" bs=64K seek=1 conv=notrunc status=none
start_nbdkit "$tmp/sock" --filter=cow --filter=error file "$tmp/base" \
  cow-on-read="$tmp/cor" cow-on-cache=true \
  error-pread=EIO error-pread-rate=100% error-pread-file="$tmp/inject"
uri="nbd+unix:///?socket=$tmp/sock"

touch "$tmp/inject"
nbdsh -u "$uri" -c "$EXPECT_EIO" -c '
expect_eio("read", lambda: h.pread(4096, 0))
expect_eio("unaligned write", lambda: h.pwrite(b"y" * 100, 65536 + 7))
expect_eio("cache copy-up", lambda: h.cache(65536, 131072))
open("'"$tmp/cor"'", "w").close()
expect_eio("cow-on-read", lambda: h.pread(4096, 196608))
'
rm "$tmp/inject" "$tmp/cor"
for offset in 0 131072 196608; do
  expect_extent "$uri" $offset "hole,zero"
done
nbdsh -u "$uri" -c '
block1 = open("'"$tmp/base"'", "rb").read()[65536:131072]
assert h.pread(65536, 65536) == block1
h.pwrite(b"y" * 100, 65536 + 7)
assert h.pread(65536, 65536) == block1[:7] + b"y" * 100 + block1[107:]
'
expect_extent "$uri" 65536 data
