# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Writes into blocks not yet in a throw-away overlay read from the
# plugin only what they need, 4K sectors in 64K blocks:
#   sub-blocks.py SOCKET LOG BASE
# SOCKET serves the cow filter (cow-changes-separator=+, cow-stats)
# over nbdkit's log filter (LOG) over the file plugin serving BASE,
# all data.  Each step checks the plugin reads it caused; every read
# and the changes view's extents are checked against a model.

import os
import re
import sys

import nbd

socket, log, base = sys.argv[1:4]
BLOCK, SUB = 65536, 4096
model = bytearray(open(base, 'rb').read())
h = nbd.NBD()
h.connect_uri('nbd+unix:///?socket=' + socket)
seen = 0
written = set()                 # sub-blocks written, by index


def fail(msg):
    sys.exit('sub-blocks.py: ' + msg)


def plugin_reads():
    """The plugin's reads since the last call, as (offset, count)."""
    global seen
    text = open(log).read()
    reads = [(int(o, 16), int(c, 16)) for o, c in
             re.findall(r'Read id=\d+ offset=(0x[0-9a-f]+) '
                        r'count=(0x[0-9a-f]+)', text[seen:])]
    seen = len(text)
    return reads


def write(offset, data):
    h.pwrite(data, offset)
    model[offset:offset + len(data)] = data
    written.update(range(offset // SUB, (offset + len(data) - 1) // SUB + 1))


def expect_reads(what, allowed):
    """Every plugin read since the last step lies inside allowed, a
    list of (offset, end); none if it is empty."""
    for offset, count in plugin_reads():
        if not any(lo <= offset and offset + count <= hi
                   for lo, hi in allowed):
            fail('%s read [%d, %d) from the plugin, outside %s'
                 % (what, offset, offset + count, allowed))


plugin_reads()
# A 4K write into a fresh block, and more into others, reads nothing.
write(1 * BLOCK + 8192, os.urandom(4096))
for s in (0, 2, 5, 15):
    write(2 * BLOCK + s * SUB, os.urandom(4096))
write(7 * BLOCK + 4096, os.urandom(3 * 4096))
expect_reads('4K-aligned writes into fresh blocks', [])

# A write of part of a sector reads at most that sector; one across a
# sector boundary at most the two sectors it touches.
write(3 * BLOCK + 1024, os.urandom(512))
expect_reads('a 512-byte write', [(3 * BLOCK, 3 * BLOCK + SUB)])
write(4 * BLOCK + SUB - 6, os.urandom(100))
expect_reads('a write across two sectors', [(4 * BLOCK, 4 * BLOCK + 2 * SUB)])

# A rewrite of a sector the overlay holds reads nothing, a zero of a
# whole sector neither.
write(1 * BLOCK + 8192, os.urandom(4096))
h.zero(4096, 5 * BLOCK + 3 * SUB, flags=nbd.CMD_FLAG_NO_HOLE)
model[5 * BLOCK + 3 * SUB:5 * BLOCK + 4 * SUB] = bytes(4096)
written.add((5 * BLOCK) // SUB + 3)
expect_reads('rewrites and zeroes of whole sectors', [])

# A block written sector by sector holds all of them and reads nothing.
for s in range(16):
    write(6 * BLOCK + s * SUB, os.urandom(4096))
expect_reads('a block written sector by sector', [])

# Reading a block held in part reads from the plugin only the rest.
if h.pread(BLOCK, 1 * BLOCK) != model[BLOCK:2 * BLOCK]:
    fail('block 1 reads wrong')
expect_reads('a read of a partial block',
             [(1 * BLOCK, 1 * BLOCK + 8192), (1 * BLOCK + 12288, 2 * BLOCK)])

# Every byte reads as the model.
if h.pread(len(model), 0) != model:
    fail('the disk does not read as the model')
plugin_reads()

# The changes view reports as data exactly the sectors written.
v = nbd.NBD()
v.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
v.connect_uri('nbd+unix:///+?socket=' + socket)
data = set()
at = 0


def extent(meta, offset, entries, err):
    global at
    for i in range(0, len(entries), 2):
        if not entries[i + 1] & nbd.STATE_HOLE:
            data.update(range(at // SUB, (at + entries[i]) // SUB))
        at += entries[i]
    return 0


while at < len(model):
    start = at
    v.block_status(len(model) - at, at, extent)
    if at == start:
        fail('the changes view answered no extent at %d' % at)
if data != written:
    fail('the changes view reports data at sectors %s, written %s'
         % (sorted(data), sorted(written)))

# A cache request completes a partial block without undoing a write.
h.cache(BLOCK, 2 * BLOCK)
if h.pread(BLOCK, 2 * BLOCK) != model[2 * BLOCK:3 * BLOCK]:
    fail('block 2 reads wrong after its copy-up')
expect_reads('the copy-up of block 2', [(2 * BLOCK, 3 * BLOCK)])
print('sub-blocks.py: %d sectors written, plugin reads as expected'
      % len(written))
