# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Rewrites kept overlays (docs/overlay-format.md) for the tests, into
# what a writer of another version, or a crash, would have left:
#   kept-format.py header FILE FIELD=VALUE...
#       sets header fields (version, flags, recoveries) and makes the
#       checksum right again;
#   kept-format.py v4 FILE [BASE]
#       rewrites a file of format version 5 (or 6 to 9, as v5 first) as
#       version 4: the same
#       blocks, states, slots, checkpoints and marks, a block held in
#       part held whole, the rest of it read from BASE (needed only if
#       there is such a block);
#   kept-format.py v3 FILE [BASE]
#       rewrites a file of format version 4 (or 5, as v4 first) as
#       version 3: the same blocks, states and slots, without the
#       checkpoints and marks;
#   kept-format.py v2 FILE [BASE]
#       rewrites a file of format version 3 or 4 (or 5, as v4 first;
#       packed: a slot per block) as version 2 (block b at its own
#       offset), with the same blocks in the same states and the same
#       flags, but MARKS_STALE (4), which version 2 lacks with the
#       checkpoints: the files that earlier releases made, for the tests
#       that still open them;
#   kept-format.py v5 FILE
#       rewrites a file of format version 6 (or 7, as v6 first) with no
#       unit in place 1 as version 5 (8-byte entries, the same blocks,
#       states, slots, checkpoints and marks);
#   kept-format.py v6 FILE
#       rewrites a file of format version 5 as version 6, or one of
#       version 7 to 9 whose log holds no record as version 6 (no log);
#   kept-format.py v7 FILE
#       rewrites a file of format version 6 as version 7, its log empty;
#   kept-format.py v8 FILE, kept-format.py v9 FILE
#       rewrites a file of format version 6 to 9 whose log holds no
#       record as version 8 (or 9), its log empty;
#   kept-format.py move FILE B:UNITS...
#       in a file of version 6 to 9, moves the units UNITS (a mask, as 0x...)
#       of each block B, which it holds, to a place-1 slot of its own
#       after the last slot, their bytes in place 0 overwritten with
#       0xee: what a writer that moved them for a view leaves;
#   kept-format.py places FILE B PLACE1 WHERE
#       sets block B's place-1 slot + 1 and its units there in a file
#       of version 6 to 9, as they are: damage, for the tests of the check.

import os
import struct
import sys

HEADER = 8192
PAGE = 4096
CRC_AT = 56
FIELDS = {'version': 8, 'flags': 60, 'recoveries': 64}
BLOCK_SIZE, BASE_SIZE = 16, 24
STATES_OFFSET = 32
LOG = 128 * 1024                # the log of versions 7 on


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


def v3_layout(block_size, base_size):
    """(states_offset, data_offset) of a version 3 file."""
    blocks = -(-base_size // block_size)
    states_length = -(-blocks // (PAGE // 4)) * PAGE
    align = max(block_size, PAGE)
    return HEADER, -(-(HEADER + states_length) // align) * align


def history_layout(block_size, base_size, entry, log=0):
    """(states_length, marks_length, data_offset) of a file of version 4
    on, its entries of entry bytes (4 in version 4, 8 in 5, 16 in 6
    and 7), its marks of 4, after the two copies of the table, then
    log bytes of log (version 7)."""
    blocks = -(-base_size // block_size)
    length = -(-blocks // (PAGE // entry)) * PAGE
    marks_length = -(-blocks // (PAGE // 4)) * PAGE
    align = max(block_size, 128 * 1024)
    end = HEADER + 2 * PAGE + length + marks_length + log
    return length, marks_length, -(-end // align) * align


def v5_parts(block_size):
    """The bytes of a sub-block of a version 5 file, or 0 if it holds
    no block in part."""
    return max(4096, block_size // 32) if block_size >= 16384 else 0


def read_packed(path, versions):
    """The bytes of a packed file of one of versions, its header (a
    bytearray) and its fields block size, base size, states offset and
    length, and data offset."""
    with open(path, 'rb') as f:
        packed = f.read()
    header = bytearray(packed[:HEADER])
    assert struct.unpack_from('<I', header, 8)[0] in versions, 'version'
    block_size, = struct.unpack_from('<I', header, BLOCK_SIZE)
    fields = struct.unpack_from('<QQQQ', header, BASE_SIZE)
    return packed, header, (block_size,) + fields


def relabel(header, version, states_offset, states_length, data_offset,
            keep_stale=False):
    """header as version, with that layout and without MARKS_STALE,
    which only versions 4 on have, unless keep_stale; the stale count
    (bits 8-31 of the flags) only in version 9."""
    struct.pack_into('<I', header, 8, version)
    flags, = struct.unpack_from('<I', header, FIELDS['flags'])
    flags = flags if keep_stale else flags & 3
    struct.pack_into('<I', header, FIELDS['flags'],
                     flags if version >= 9 else flags & 0xff)
    struct.pack_into('<QQQ', header, STATES_OFFSET, states_offset,
                     states_length, data_offset)
    seal(header)


def version_of(path):
    with open(path, 'rb') as f:
        f.seek(8)
        return struct.unpack('<I', f.read(4))[0]


def convert_log(path, old, new):
    """A file of version old as version new, each 6 to 9: the same
    blocks and entries, without a log or with an empty one."""
    was, header, (block_size, base_size, offset, length, data) = \
        read_packed(path, (old,))
    _, marks_length, data_offset = history_layout(
        block_size, base_size, 16, LOG if new >= 7 else 0)
    relabel(header, new, offset, length, data_offset, keep_stale=True)
    with open(path + '.new', 'wb') as f:
        f.truncate(data_offset + len(was) - data)
        f.write(header + was[HEADER:offset + length + marks_length])
        f.seek(data_offset)
        f.write(was[data:])
    os.rename(path + '.new', path)


def as_v6(path):
    """path, rewritten as version 6 first if it is version 7 or 8."""
    if version_of(path) in (7, 8, 9):
        convert_log(path, version_of(path), 6)


def to_v4(path, base=None):
    """A version 5 file (or 6 to 8, as version 5 first) as version 4:
    4-byte entries, a block held in part filled from base."""
    as_v6(path)
    if version_of(path) == 6:
        convert_entries(path, 6, 5)
    v5, header, (block_size, base_size, offset, length, data) = \
        read_packed(path, (5,))
    blocks = -(-base_size // block_size)
    marks_length = -(-blocks // (PAGE // 4)) * PAGE
    states_length, _, data_offset = history_layout(block_size, base_size, 4)
    states = bytearray(states_length)
    part = v5_parts(block_size)
    body = bytearray(v5[data:])
    for b in range(blocks):
        entry, parts = struct.unpack_from('<II', v5, offset + 8 * b)
        struct.pack_into('<I', states, 4 * b, entry)
        if parts == 0:
            continue
        assert base is not None, 'block %d is held in part: name BASE' % b
        at = (entry - 2) * block_size
        with open(base, 'rb') as f:
            for i in range(32):
                start = b * block_size + i * part
                end = min(start + part, (b + 1) * block_size, base_size)
                if parts >> i & 1 or start >= end:
                    continue
                f.seek(start)
                piece = f.read(end - start)
                body[at + i * part:at + i * part + len(piece)] = piece
    relabel(header, 4, offset, states_length, data_offset, keep_stale=True)
    marks = v5[offset + length:offset + length + marks_length]
    with open(path + '.v4', 'wb') as f:
        f.truncate(data_offset + len(body))
        f.write(header + v5[HEADER:offset] + states + marks)
        f.seek(data_offset)
        f.write(body)
    os.rename(path + '.v4', path)


def as_v4(path, base):
    """path, rewritten as version 4 first if it is version 5 to 8."""
    if version_of(path) in (5, 6, 7, 8, 9):
        to_v4(path, base)


def to_v3(path, base=None):
    """A version 4 file as version 3: no checkpoints and no marks."""
    as_v4(path, base)
    v4, header, (block_size, base_size, offset, length, data) = \
        read_packed(path, (4,))
    states_offset, data_offset = v3_layout(block_size, base_size)
    relabel(header, 3, states_offset, length, data_offset)
    with open(path + '.v3', 'wb') as f:
        f.truncate(data_offset + len(v4) - data)
        f.write(header + v4[offset:offset + length])
        f.seek(data_offset)
        f.write(v4[data:])
    os.rename(path + '.v3', path)


def to_v2(path, base=None):
    as_v4(path, base)
    packed, header, (block_size, base_size, offset, length, data) = \
        read_packed(path, (3, 4))
    blocks = -(-base_size // block_size)
    states_length, data_offset = v2_layout(block_size, base_size)
    relabel(header, 2, HEADER, states_length, data_offset)

    states = bytearray(states_length)
    with open(path + '.v2', 'wb') as f:
        f.truncate(data_offset + base_size)     # sparse, as the filter's
        for b in range(blocks):
            entry, = struct.unpack_from('<I', packed, offset + 4 * b)
            state = 0 if entry == 0 else 2 if entry == 1 else 1
            states[b // 4] |= state << (2 * (b % 4))
            if state == 1:
                start = b * block_size
                end = min((b + 1) * block_size, base_size)
                at = data + (entry - 2) * block_size
                f.seek(data_offset + start)
                f.write(packed[at:at + end - start].ljust(end - start, b'\0'))
        f.seek(0)
        f.write(header + states)
    os.rename(path + '.v2', path)


def convert_entries(path, old, new):
    """A file of version old as version new, one of 5 and 6: the same
    blocks, their entries cut to 8 bytes or widened to 16."""
    was, header, (block_size, base_size, offset, length, data) = \
        read_packed(path, (old,))
    blocks = -(-base_size // block_size)
    states_length, marks_length, data_offset = history_layout(
        block_size, base_size, 16 if new == 6 else 8)
    states = bytearray(states_length)
    size = 16 if old == 6 else 8
    for b in range(blocks):
        entry = struct.unpack_from('<II', was, offset + size * b)
        assert size == 8 or was[offset + size * b + 8:
                                offset + size * b + 16] == bytes(8), b
        struct.pack_into('<II', states, (16 if new == 6 else 8) * b, *entry)
    relabel(header, new, offset, states_length, data_offset, keep_stale=True)
    marks = was[offset + length:offset + length + marks_length]
    with open(path + '.new', 'wb') as f:
        f.truncate(data_offset + len(was) - data)
        f.write(header + was[HEADER:offset] + states + marks)
        f.seek(data_offset)
        f.write(was[data:])
    os.rename(path + '.new', path)


def move(path, moves):
    """In a version 6 to 8 file, the units of each B:UNITS of moves
    moved to a place-1 slot of B's own after the last slot, overwritten
    with 0xee in place 0."""
    v6, header, (block_size, base_size, offset, length, data) = \
        read_packed(path, (6, 7, 8, 9))
    unit = v5_parts(block_size) or block_size
    body = bytearray(v6[data:])
    slots = -(-len(body) // block_size)
    body = body.ljust(slots * block_size, b'\0')
    states = bytearray(v6[offset:offset + length])
    for m in moves:
        b, units = (int(x, 0) for x in m.split(':'))
        entry, parts = struct.unpack_from('<II', states, 16 * b)
        block_bytes = min(block_size, base_size - b * block_size)
        every = (1 << -(-block_bytes // unit)) - 1
        assert entry >= 2 and units & ~(parts or every) == 0, m
        old, new = (entry - 2) * block_size, slots * block_size
        body += bytes(block_size)
        for i in range(32):
            if units >> i & 1:
                a, z = i * unit, (i + 1) * unit
                body[new + a:new + z] = body[old + a:old + z]
                body[old + a:old + z] = b'\xee' * unit
        struct.pack_into('<II', states, 16 * b + 8, slots + 1, units)
        slots += 1
    with open(path, 'r+b') as f:
        f.seek(offset)
        f.write(states)
        f.seek(data)
        f.write(body)


def set_places(path, b, place1, where):
    with open(path, 'r+b') as f:
        header = f.read(HEADER)
        assert struct.unpack_from('<I', header, 8)[0] in (6, 7, 8, 9), 'version'
        offset, = struct.unpack_from('<Q', header, STATES_OFFSET)
        f.seek(offset + 16 * int(b) + 8)
        f.write(struct.pack('<II', int(place1, 0), int(where, 0)))


if __name__ == '__main__':
    command, path = sys.argv[1], sys.argv[2]
    if command == 'header':
        set_fields(path, sys.argv[3:])
    elif command == 'v5':
        as_v6(path)
        convert_entries(path, 6, 5)
    elif command == 'v6' and version_of(path) in (7, 8, 9):
        convert_log(path, version_of(path), 6)
    elif command == 'v6':
        convert_entries(path, 5, 6)
    elif command in ('v7', 'v8', 'v9'):
        convert_log(path, version_of(path), int(command[1]))
    elif command == 'move':
        move(path, sys.argv[3:])
    elif command == 'places':
        set_places(path, *sys.argv[3:6])
    elif command in ('v2', 'v3', 'v4'):
        convert = {'v2': to_v2, 'v3': to_v3, 'v4': to_v4}[command]
        convert(path, *sys.argv[3:4])
    else:
        sys.exit('usage: kept-format.py header FILE FIELD=VALUE... | '
                 'v2|v3|v4 FILE [BASE] | v5|v6|v7|v8|v9 FILE | move FILE B:UNITS... | '
                 'places FILE B PLACE1 WHERE')
