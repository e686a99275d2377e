#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Clones used once each, one after another, as short-lived machines use
# a golden image:
#   clone-flood.py SOCKET PIDFILE COUNT SAMPLES
# Each of COUNT connections opens a new clone name, reads the golden
# image's first sector, writes a tag of its own at three places (one
# of them a partial block) and reads it back, then disconnects.  After
# each of SAMPLES evenly spaced clones it notes nbdkit's open
# descriptors, resident memory and the disk space of its overlay files.  Prints one JSON object: the clones
# served, refused, and the samples.  A sample is the reading with the
# fewest descriptors of five over half a second: an overlay whose clone
# has just left is ended by nbdkit's lifetime thread, which a loaded
# machine may run a clone or two late, while what leaks stays.
import json
import os
import sys
import time

import nbd

sock, pidfile, count, samples = sys.argv[1:5]
count, samples = int(count), int(samples)
pid = int(open(pidfile).read())


def usage():
    fds = os.listdir('/proc/%d/fd' % pid)
    overlay = 0
    for fd in fds:
        path = '/proc/%d/fd/%s' % (pid, fd)
        try:
            if '/nbdkit-cow-' in os.readlink(path):
                overlay += os.stat(path).st_blocks // 2
        except OSError:
            pass    # a connection's socket, closed meanwhile
    with open('/proc/%d/status' % pid) as f:
        rss = [int(line.split()[1]) for line in f if line.startswith('VmRSS:')]
    return {'fds': len(fds), 'rss_kib': rss[0], 'overlay_kib': overlay}


golden = None
served, refused, taken = 0, 0, []
every = max(1, count // samples)
for i in range(count):
    h = nbd.NBD()
    h.set_export_name('golden@clone-%d' % i)
    try:
        h.connect_unix(sock)
    except nbd.Error:
        refused += 1
        continue
    first = h.pread(512, 0)
    if golden is None:
        golden = first
    assert first == golden, 'clone %d does not start as the golden image' % i
    tag = b'clone %08d ' % i * 32
    for offset in (0, 1 << 20, (3 << 20) + 100):
        h.pwrite(tag, offset)
    for offset in (0, 1 << 20, (3 << 20) + 100):
        assert h.pread(len(tag), offset) == tag, 'clone %d reads back wrong' % i
    h.shutdown()
    served += 1
    if (i + 1) % every == 0:
        readings = [usage()]
        for _ in range(4):
            time.sleep(0.1)
            readings.append(usage())
        taken.append(dict(min(readings, key=lambda r: r['fds']),
                          clones=i + 1))
print(json.dumps({'served': served, 'refused': refused, 'samples': taken}))
