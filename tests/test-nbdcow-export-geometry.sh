#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow export lays the qcow2 file out right for every geometry: the
# smallest clusters (4K blocks, whose L2 tables each map 2M, so many
# tables and more than one refcount block), blocks larger than qcow2's
# largest cluster (4M blocks in 2M clusters), bases whose size is not a
# whole number of blocks or clusters, and an empty overlay.  Each file
# is clean to qemu-img check and reads as the live view did.
. "$abs_top_srcdir/tests/functions.sh"

uri="nbd+unix:///?socket=$tmp/sock"

# export_matches BLOCK-SIZE BASE-SIZE WRITES: an overlay of a fresh base
# holding WRITES random writes and zeroes, exported and compared.
export_matches ()
{
  block=$1 size=$2 writes=$3
  rm -f "$tmp/base" "$tmp/ov" "$tmp/live.img" "$tmp/o.qcow2"
  make_base "$tmp/base" "$size"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
    cow-file="$tmp/ov" cow-block-size="$block"
  nbdsh -u "$uri" -c "
import random
r = random.Random($block + $size)
size = h.get_size()
for i in range($writes):
    n = min(r.choice([1, 4096, 70000, 3 << 20]), size)
    off = r.randrange(size - n + 1)
    if r.random() < 0.8:
        h.pwrite(bytes([r.randrange(1, 256)]) * n, off)
    else:
        h.zero(n, off)
"
  nbdcopy "$uri" "$tmp/live.img"
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
  rm -f "$tmp/sock"
  "$NBDCOW" export "$tmp/ov" --base="$tmp/base" "$tmp/o.qcow2"
  qemu-img check "$tmp/o.qcow2" ||
    fail "block $block, base $size: qemu-img check"
  qemu-img compare -f qcow2 -F raw "$tmp/o.qcow2" "$tmp/live.img" ||
    fail "block $block, base $size: differs from the live view"
}

export_matches 4096 $(( 40 * 1024 * 1024 + 1234 )) 600
export_matches $(( 4 * 1024 * 1024 )) $(( 13 * 1024 * 1024 + 5 )) 12
export_matches 65536 $(( 5 * 1024 * 1024 + 100 )) 40
export_matches 65536 $(( 3 * 1024 * 1024 )) 0
