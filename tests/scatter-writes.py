# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Scattered guest-like writes through the export, applied also to
# EXPECTED (a copy of the base) so that EXPECTED ends as the image the
# clients should see.
#
# usage: scatter-writes.py URI EXPECTED SEED COUNT

import random
import sys

import nbd

uri, expected, seed, count = sys.argv[1:5]
rng = random.Random(int(seed))
h = nbd.NBD()
h.connect_uri(uri)
size = h.get_size()
with open(expected, "r+b") as f:
    for i in range(int(count)):
        n = rng.choice([512, 4096, 65536, 1 << 20, rng.randint(1, 200000)])
        off = rng.randrange(size - n)
        if rng.randrange(5) == 0:
            h.zero(n, off)
            data = bytes(n)
        else:
            data = rng.randbytes(n)
            h.pwrite(data, off)
        f.seek(off)
        f.write(data)
h.shutdown()
