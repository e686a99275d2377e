#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Guarantee 3: concurrent writes to disjoint bytes of one block all
# survive.  Four connections over a slow base (delay filter) keep many
# writes in flight: whole aligned blocks, single unaligned sectors
# sharing blocks with other connections, and runs straddling block
# boundaries.  Every sector is written once; all must be there.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 4M "$tmp/base"
start_nbdkit "$tmp/sock" --filter=cow --filter=delay file "$tmp/base" \
  delay-read=50ms
nbdsh -c '
import random
uri = "nbd+unix:///?socket='"$tmp/sock"'"
rng = random.Random(3)
S, B = 512, 65536
size = 4 * 1024 * 1024
hs = []
for i in range(4):
    h = nbd.NBD()
    h.connect_uri(uri)
    hs.append(h)

def sector_data(s):
    return s.to_bytes(4, "big") * (S // 4)

# Carve the disk into requests: some whole blocks, the rest runs of 1-4
# sectors, which straddle block boundaries now and then.
requests, s = [], 0
while s < size // S:
    if s % (B // S) == 0 and rng.randrange(4) == 0:
        n = B // S
    else:
        n = min(rng.randint(1, 4), size // S - s)
    requests.append((s, n))
    s += n
rng.shuffle(requests)

pending = {h: [] for h in hs}
for (s, n) in requests:
    h = rng.choice(hs)
    data = b"".join(sector_data(x) for x in range(s, s + n))
    pending[h].append(h.aio_pwrite(data, s * S))
    while h.aio_in_flight() >= 16:
        h.poll(-1)
for h in hs:
    for c in pending[h]:
        while not h.aio_command_completed(c):
            h.poll(-1)

got = hs[0].pread(size, 0)
for x in range(size // S):
    assert got[x * S:(x + 1) * S] == sector_data(x), "sector %d lost" % x
print(len(requests), "writes, all sectors present")
'
