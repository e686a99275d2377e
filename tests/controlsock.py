# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The control socket's protocol (cow-control=SOCKET) for the tests: a
# request is its fields, each ended by a NUL byte, sent whole before
# the answer is read to its end.


def read_all(s):
    """What the peer of socket s sends until it shuts its side."""
    data = b''
    while True:
        part = s.recv(4096)
        if not part:
            return data
        data += part


def ask(path, request):
    """Sends request (bytes) to the control socket at path and returns
    its answer (bytes); raises OSError if no server is there."""
    import socket
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(path)
        s.sendall(request)
        s.shutdown(socket.SHUT_WR)
        return read_all(s)
    finally:
        s.close()


def command(path, *fields):
    """The answer to a command of fields (strings), or None if no server
    answered (a power cut, a kill)."""
    try:
        return ask(path, b''.join(f.encode() + b'\0'
                                  for f in fields)).decode() or None
    except OSError:
        return None
