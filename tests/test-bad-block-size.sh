#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A bad cow-block-size stops nbdkit at start, naming the parameter and
# the value; every power of two from 4K to 2G starts, as with nbdkit's
# own filter, and serves.
. "$abs_top_srcdir/tests/functions.sh"

for v in 0 3 1000 2048 -1 1E abc 4097 3G 4G; do
  expect_start_failure "cow-block-size=$v" --filter=cow memory 1M cow-block-size="$v"
done
for v in 4096 4K 64K 1M 4M 32M 64M 1G 2G; do
  "$NBDKIT" -U - --filter=cow memory 1M cow-block-size="$v" \
    --run 'nbdinfo --size "$uri"' >/dev/null || fail "cow-block-size=$v refused"
done
# Blocks larger than the disk and than NBD's largest preferred size
# still serve reads and writes.
"$NBDKIT" -U - --filter=cow pattern 3M cow-block-size=64M --run '
  nbdsh -u "$uri" -c "
import struct
h.pwrite(b\"x\" * 1000, 1048000)
want = b\"\".join(struct.pack(\">Q\", o) for o in range(1048576, 1052672, 8))
got = h.pread(4096, 1048576)
n = 1049000 - 1048576
assert got[:n] == b\"x\" * n, got[:16]
assert got[n:] == want[n:]
assert h.get_block_size(nbd.SIZE_PREFERRED) == 32 * 1024 * 1024
"' || fail "cow-block-size=64M does not serve"
