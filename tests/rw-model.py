# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Random reads, writes, zeroes, trims and caches through the filter,
# checked byte for byte against an in-memory model of the disk.
#
# usage: rw-model.py URI BASE-FILE BLOCK-SIZE SEED OPS
#
# Requests have aligned and unaligned heads and tails relative to the
# cow block size and run up to the last byte of disks whose size is not
# a multiple of it.  Whole blocks inside a trim read as zero afterwards
# (the filter's documented behaviour); partial blocks are untouched.

import random
import sys

import nbd

uri, base_file, block_size, seed, ops = sys.argv[1:6]
block_size = int(block_size)
rng = random.Random(int(seed))

with open(base_file, "rb") as f:
    model = bytearray(f.read())
size = len(model)

h = nbd.NBD()
# Requests of any alignment, whatever minimum the server advertises:
# the filter takes them all (tests/test-block-limits.sh).
h.set_strict_mode(h.get_strict_mode() & ~nbd.STRICT_ALIGN)
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri(uri)
assert h.get_size() == size, "size %d != %d" % (h.get_size(), size)
assert not h.is_read_only()


def block_end(b):
    return min((b + 1) * block_size, size)


def pick_range():
    """A range with heads and tails on and off block boundaries."""
    nblocks = (size + block_size - 1) // block_size
    kind = rng.randrange(6)
    if kind == 0:                           # aligned whole blocks
        b = rng.randrange(nblocks)
        n = rng.randint(1, 3)
        start = b * block_size
        end = block_end(min(b + n, nblocks) - 1)
    elif kind == 1:                         # up to the very last byte
        end = size
        start = max(0, size - rng.randint(1, 3 * block_size))
    elif kind == 2:                         # inside one block
        b = rng.randrange(nblocks)
        lo, hi = b * block_size, block_end(b)
        start = rng.randrange(lo, hi)
        end = rng.randint(start + 1, hi)
    else:                                   # anywhere, any length
        start = rng.randrange(size)
        end = min(size, start + rng.randint(1, 3 * block_size))
    return start, end - start


def check(offset, count):
    got = h.pread(count, offset)
    want = bytes(model[offset:offset + count])
    if got != want:
        bad = next(i for i in range(count) if got[i] != want[i])
        sys.exit("mismatch at byte %d (read %d+%d): got %d want %d"
                 % (offset + bad, offset, count, got[bad], want[bad]))


for i in range(int(ops)):
    offset, count = pick_range()
    op = rng.randrange(10)
    if op < 4:
        data = rng.randbytes(count)
        h.pwrite(data, offset, nbd.CMD_FLAG_FUA if rng.randrange(4) == 0 else 0)
        model[offset:offset + count] = data
    elif op < 6:
        flags = rng.choice([0, nbd.CMD_FLAG_NO_HOLE, nbd.CMD_FLAG_FAST_ZERO])
        h.zero(count, offset, flags)
        model[offset:offset + count] = bytes(count)
    elif op == 6:
        h.trim(count, offset)
        first = (offset + block_size - 1) // block_size
        b = first
        while b * block_size < offset + count and block_end(b) <= offset + count:
            model[b * block_size:block_end(b)] = bytes(block_end(b) - b * block_size)
            b += 1
    elif op == 7:
        h.cache(count, offset)
    else:
        check(offset, count)
    if op < 8 and rng.randrange(3) == 0:
        check(offset, count)

# The whole disk, in reads of mixed sizes.
offset = 0
while offset < size:
    count = min(size - offset, rng.choice([512, 4096, 1 << 20]))
    check(offset, count)
    offset += count

# Extents: everything reported as reading zero must be zero.
extents_end = 0


def extent_cb(metacontext, off, entries, err):
    global extents_end
    for i in range(0, len(entries), 2):
        length, flags = entries[i], entries[i + 1]
        if flags & nbd.STATE_ZERO and any(model[off:off + length]):
            sys.exit("extent %d+%d claims zeros but data is not zero"
                     % (off, length))
        off += length
    extents_end = off


while extents_end < size:
    h.block_status(min(size - extents_end, 64 << 20), extents_end, extent_cb)

h.shutdown()
print("%s ops, block size %d, disk size %d: ok" % (ops, block_size, size))
