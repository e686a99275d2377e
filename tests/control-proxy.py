# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A control socket between nbdcow and nbdkit's (cow-control=) that
# passes each command on, but at the first command of verb VERB (at its
# Nth with VERB#N) does ACTION first: "term PID" sends SIGTERM to PID (nbdcow) and passes the
# command on a moment later; "kill PID" kills PID (nbdkit) with SIGKILL
# and answers nothing.  Says "ready" on stdout once it listens, and
# "did ACTION" when it has.
#
#   control-proxy.py LISTEN SERVER VERB ACTION PIDFILE

import os
import signal
import socket
import sys
import time

import controlsock

listen, server, verb, action, pidfile = sys.argv[1:6]
verb, _, nth = verb.partition('#')
left = int(nth or 1)
s = socket.socket(socket.AF_UNIX)
s.bind(listen)
s.listen(8)
print('ready', flush=True)
done = False
while True:
    c, _ = s.accept()
    request = controlsock.read_all(c)
    if request.split(b'\0')[0] == verb.encode():
        left -= 1
    if not done and left == 0:
        done = True
        with open(pidfile) as f:
            pid = int(f.read().strip())
        if action == 'kill':
            os.kill(pid, signal.SIGKILL)
            print('did kill', flush=True)
            c.close()
            continue
        os.kill(pid, signal.SIGTERM)
        print('did term', flush=True)
        time.sleep(0.2)
    try:
        answer = controlsock.ask(server, request)
    except OSError:
        answer = b''
    c.sendall(answer)
    c.close()
