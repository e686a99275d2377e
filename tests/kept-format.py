# Rewrites kept overlays (docs/overlay-format.md) for the tests, into
# what a writer of another version, or a crash, would have left:
#   kept-format.py header FILE FIELD=VALUE...
#       sets header fields (version, flags, recoveries) and makes the
#       checksum right again;
#   kept-format.py v2 FILE
#       rewrites a file of format version 3 (packed: a slot per block)
#       as version 2 (block b at its own offset), with the same blocks
#       in the same states and the same flags: the files that earlier
#       releases made, for the tests that still open them.

import os
import struct
import sys

HEADER = 8192
PAGE = 4096
CRC_AT = 56
FIELDS = {'version': 8, 'flags': 60, 'recoveries': 64}
BLOCK_SIZE, BASE_SIZE = 16, 24
STATES_LENGTH = 40


def crc32c(data):
    crc = 0xffffffff
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82f63b78 if crc & 1 else 0)
    return crc ^ 0xffffffff


def seal(header):
    """Sets the checksum of header (a bytearray) to match it."""
    struct.pack_into('<I', header, CRC_AT, 0)
    struct.pack_into('<I', header, CRC_AT, crc32c(bytes(header)))


def set_fields(path, assignments):
    with open(path, 'r+b') as f:
        header = bytearray(f.read(HEADER))
        for arg in assignments:
            name, value = arg.split('=')
            struct.pack_into('<I', header, FIELDS[name], int(value))
        seal(header)
        f.seek(0)
        f.write(header)


def v2_layout(block_size, base_size):
    """(states_length, data_offset) of a version 2 file."""
    blocks = -(-base_size // block_size)
    states_length = -(-blocks // (PAGE * 4)) * PAGE
    align = max(block_size, PAGE)
    return states_length, -(-(HEADER + states_length) // align) * align


def to_v2(path):
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
    struct.pack_into('<QQ', header, STATES_LENGTH, states_length,
                     data_offset)
    seal(header)

    states = bytearray(states_length)
    with open(path + '.v2', 'wb') as f:
        f.truncate(data_offset + base_size)     # sparse, as the filter's
        for b in range(blocks):
            entry, = struct.unpack_from('<I', v3, offset + 4 * b)
            state = 0 if entry == 0 else 2 if entry == 1 else 1
            states[b // 4] |= state << (2 * (b % 4))
            if state == 1:
                start = b * block_size
                end = min((b + 1) * block_size, base_size)
                at = data + (entry - 2) * block_size
                f.seek(data_offset + start)
                f.write(v3[at:at + end - start].ljust(end - start, b'\0'))
        f.seek(0)
        f.write(header + states)
    os.rename(path + '.v2', path)


if __name__ == '__main__':
    command, path = sys.argv[1], sys.argv[2]
    if command == 'header':
        set_fields(path, sys.argv[3:])
    elif command == 'v2':
        to_v2(path)
    else:
        sys.exit('usage: kept-format.py header|v2 FILE [FIELD=VALUE...]')
