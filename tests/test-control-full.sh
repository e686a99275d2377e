#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# With every one of the control socket's 64 places taken by clients
# that send nothing, each new client takes the place of the one
# connected longest: of 70 such clients the first 6 are dropped and the
# others stay, and nbdcow's command is then served.
. "$abs_top_srcdir/tests/functions.sh"

ctl=$tmp/ctl
start_nbdkit "$tmp/sock" --filter=cow pattern 16M cow-control="$ctl"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c 'h.pwrite(b"x" * 4096, 0)'
"$PYTHON" - "$ctl" <<'PYEOF' || fail "see above"
import socket, sys, time
clients = []
for i in range(70):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(sys.argv[1])
    clients.append(s)
    time.sleep(0.01)            # accepted one at a time, in this order
time.sleep(1)
dropped = []
for i, s in enumerate(clients):
    s.setblocking(False)
    try:
        if s.recv(1) == b'':
            dropped.append(i)
    except BlockingIOError:
        pass
    except ConnectionResetError:
        dropped.append(i)
if dropped != list(range(6)):
    sys.exit('dropped clients %s, not the 6 oldest' % dropped)
PYEOF
"$NBDCOW" checkpoint create "$ctl" "" c1 ||
  fail "a command was not served with every place taken"
