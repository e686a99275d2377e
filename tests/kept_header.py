# Rewrites the header of a kept overlay (docs/overlay-format.md) for the
# tests: kept_header.py FILE FIELD=VALUE...; fields version, flags,
# recoveries.  The checksum is made right again, so the file is what a
# writer of that version would have left.  kept_v2.py imports it.

import struct
import sys

FIELDS = {'version': 8, 'flags': 60, 'recoveries': 64}
CRC_AT = 56
HEADER = 8192


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


if __name__ == '__main__':
    path = sys.argv[1]
    with open(path, 'r+b') as f:
        header = bytearray(f.read(HEADER))
        for arg in sys.argv[2:]:
            name, value = arg.split('=')
            struct.pack_into('<I', header, FIELDS[name], int(value))
        seal(header)
        f.seek(0)
        f.write(header)
