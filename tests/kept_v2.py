# Rewrites a kept overlay of format version 3 (packed: a slot per
# block) as format version 2 (block b at its own offset), with the same
# blocks in the same states and the same flags: the files that earlier
# releases made, for the tests that they still open.
# usage: kept_v2.py FILE

import os
import struct
import sys

from kept_header import HEADER, seal

BLOCK_SIZE, BASE_SIZE = 16, 24
STATES_OFFSET, STATES_LENGTH, DATA_OFFSET = 32, 40, 48
PAGE = 4096


def v2_layout(block_size, base_size):
    """(states_length, data_offset) of a version 2 file."""
    blocks = -(-base_size // block_size)
    states_length = -(-blocks // (PAGE * 4)) * PAGE
    align = max(block_size, PAGE)
    return states_length, -(-(HEADER + states_length) // align) * align


path = sys.argv[1]
with open(path, 'rb') as f:
    v3 = f.read()
header = bytearray(v3[:HEADER])
assert struct.unpack_from('<I', header, 8)[0] == 3, 'not version 3'
block_size, = struct.unpack_from('<I', header, BLOCK_SIZE)
base_size, offset, length, data = struct.unpack_from('<QQQQ', header,
                                                     BASE_SIZE)
blocks = -(-base_size // block_size)
states_length, data_offset = v2_layout(block_size, base_size)
struct.pack_into('<I', header, 8, 2)
struct.pack_into('<QQ', header, STATES_LENGTH, states_length, data_offset)
seal(header)

states = bytearray(states_length)
with open(path + '.v2', 'wb') as f:
    f.truncate(data_offset + base_size)         # sparse, as the filter's
    for b in range(blocks):
        entry, = struct.unpack_from('<I', v3, offset + 4 * b)
        state = 0 if entry == 0 else 2 if entry == 1 else 1
        states[b // 4] |= state << (2 * (b % 4))
        if state == 1:
            start, end = b * block_size, min((b + 1) * block_size, base_size)
            at = data + (entry - 2) * block_size
            f.seek(data_offset + start)
            f.write(v3[at:at + end - start].ljust(end - start, b'\0'))
    f.seek(0)
    f.write(header + states)
os.rename(path + '.v2', path)
