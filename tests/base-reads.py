# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The reads a plugin served, from nbdkit's log filter, against its
# base file's data and holes, for the tests of cow-fill:
#   base-reads.py LOG BASE EXTRA [WRITTEN]
# fails unless no hole of BASE was read, every data byte was read, and
# with EXTRA 0 each exactly once, else at most EXTRA bytes in all
# beyond the data.  WRITTEN lists 4K units, one number a line, that
# clients wrote whole: their data may be never read.  Prints what it
# found.

import os
import re
import sys

UNIT = 4096

log, base, extra = sys.argv[1], sys.argv[2], int(sys.argv[3])
written = set()
if len(sys.argv) > 4:
    written = {int(line) for line in open(sys.argv[4])}
reads = [(int(o, 16), int(c, 16)) for o, c in
         re.findall(r'Read id=\d+ offset=(0x[0-9a-f]+) count=(0x[0-9a-f]+)',
                    open(log).read())]

fd = os.open(base, os.O_RDONLY)
data, at = set(), 0
while True:
    try:
        start = os.lseek(fd, at, os.SEEK_DATA)
    except OSError:
        break
    at = os.lseek(fd, start, os.SEEK_HOLE)
    data.update(range(start // UNIT, at // UNIT))

seen = {}
for offset, count in reads:
    for unit in range(offset // UNIT, (offset + count + UNIT - 1) // UNIT):
        seen[unit] = seen.get(unit, 0) + 1
holes = sorted(u for u in seen if u not in data)
twice = sorted(u for u, n in seen.items() if n > 1)
missed = data - set(seen) - written
read_bytes = sum(count for _, count in reads)
data_bytes = len(data) * UNIT
assert not holes, 'holes read: %d units, the first at %d' % (
    len(holes), holes[0] * UNIT)
assert not missed, '%d data units never read' % len(missed)
if extra == 0:
    assert not twice, '%d units read twice, the first at %d' % (
        len(twice), twice[0] * UNIT)
assert read_bytes <= data_bytes + extra, \
    'read %d bytes: more than the %d of data and %d' % (
        read_bytes, data_bytes, extra)
print('base data %d bytes, read %d, no hole read' % (data_bytes, read_bytes))
