#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Clients that pipeline requests and hang up at once, as no library
# client would: each connection does the fixed newstyle handshake
# (NBD_OPT_EXPORT_NAME of the default export), sends REQUESTS 4K reads
# without waiting for a reply, and closes its socket.
#   raw-hangups.py SOCKET CONNECTIONS REQUESTS
# Exits 1, saying where, if the server stops answering.
import socket
import struct
import sys

path, connections, requests = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
IHAVEOPT = 0x49484156454F5054
OPT_EXPORT_NAME = 1
REQUEST_MAGIC = 0x25609513
CMD_READ = 0


def receive(s, n):
    data = b''
    while len(data) < n:
        more = s.recv(n - len(data))
        if not more:
            raise EOFError('the server hung up')
        data += more
    return data


for i in range(connections):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.connect(path)
        receive(s, 18)                          # magic, flags
        s.sendall(struct.pack('>I', 1))         # NBD_FLAG_C_FIXED_NEWSTYLE
        s.sendall(struct.pack('>QII', IHAVEOPT, OPT_EXPORT_NAME, 0))
        size, = struct.unpack('>Q', receive(s, 8))
        receive(s, 2 + 124)                     # transmission flags, zeros
        s.sendall(b''.join(struct.pack('>IHHQQI', REQUEST_MAGIC, 0, CMD_READ,
                                       k, k * 4096 % (size - 4096), 4096)
                           for k in range(requests)))
        s.close()
    except (OSError, EOFError) as e:
        sys.exit('connection %d: %s' % (i, e))
print('%d connections hung up with %d requests each in flight'
      % (connections, requests))
