#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Guarantee 1: a read that starts after a write, zero or trim completed,
# on any connection, sees it.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 8 * 1024 * 1024 ))
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-block-size=4K
nbdsh -c '
import random
uri = "nbd+unix:///?socket='"$tmp/sock"'"
hs = []
for i in range(3):
    h = nbd.NBD()
    h.connect_uri(uri)
    assert h.can_multi_conn()
    hs.append(h)
rng = random.Random(7)
size = hs[0].get_size()
for i in range(300):
    w, r = rng.choice(hs), rng.choice(hs)
    off = rng.randrange(size - 20000)
    n = rng.randint(1, 20000)
    op = rng.randrange(3)
    if op == 0:
        data = rng.randbytes(n)
        w.pwrite(data, off)
    elif op == 1:
        w.zero(n, off, rng.choice([0, nbd.CMD_FLAG_NO_HOLE]))
        data = bytes(n)
    else:
        # A trim makes whole 4K blocks read as zero.
        w.trim(n, off)
        lo, hi = -(-off // 4096) * 4096, (off + n) // 4096 * 4096
        if lo >= hi:
            continue
        off, n, data = lo, hi - lo, bytes(hi - lo)
    assert r.pread(n, off) == data, "op %d: read on another connection missed it" % i
'
