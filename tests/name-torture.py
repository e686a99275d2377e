#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Clients as an attacker and a careless user would send them, over the
# file plugin's dir= with clones and overlays that end with their
# clients:
#   name-torture.py SOCKET temp|kept SECONDS SEED DIR
# Four workers run sessions one after another, each on a name drawn at
# random: the plugin's exports (DIR's files a and b), clones of them
# with tags plain and hostile (../, %, /, long), and names whose base
# the plugin does not have (which must be refused, the server going on).
# A session connects, checks its own quarter of the disk against the
# model (a throw-away overlay may have ended since the name last had no
# client connected, a client about to connect not counting: the
# quarter then reads as the base, and the model follows),
# writes, zeroes, trims and reads there, each read checked, then leaves
# cleanly or drops its socket.  Several workers share a name at once,
# each in its own quarter.  Prints one JSON object of counts; exits 1
# on the first wrong byte or wrong refusal.
import json
import os
import random
import sys
import threading
import time

import nbd

sock, mode, seconds, seed, directory = sys.argv[1:6]
stop = time.monotonic() + float(seconds)
bases = {n: open(os.path.join(directory, n), 'rb').read() for n in 'ab'}
size = len(bases['a'])
WORKERS = 4
QUARTER = size // WORKERS
BLOCK = 65536
TAGS = ['t0', 't1', '', '../../x', '%2F', 'a/b', 'é', 'x' * 200]
names = (['a', 'b'] + ['%s@%s' % (b, t) for b in 'ab' for t in TAGS] +
         ['', '@t0', 'nosuch', 'nosuch@t0', '../a', 'a/b', '@'])

lock = threading.Lock()
model = {}              # name -> bytearray, the disk as written
connected = {}          # name -> connections made and not closed
maybe_ended = {}        # name -> workers whose quarter may read as the base
counts = {'sessions': 0, 'refused': 0, 'ended': 0, 'reads': 0, 'drops': 0}
failures = []


def base_of(name):
    return name.rsplit('@', 1)[0]


def fail(msg):
    with lock:
        failures.append(msg)


def enter(name):
    with lock:
        if name not in model:
            model[name] = bytearray(bases[base_of(name)])
            maybe_ended[name] = set()
            connected[name] = 0


def joined(name):
    """Counted once connected, not before: until then the overlay may
    end with its last other client (a connect that takes longer than
    the grace, under load, found a new one)."""
    with lock:
        connected[name] += 1


def leave(name):
    with lock:
        connected[name] -= 1
        if connected[name] == 0 and mode == 'temp':
            maybe_ended[name] = set(range(WORKERS))


def check_quarter(h, name, w, lo, hi):
    got = h.pread(hi - lo, lo)
    with lock:
        want = model[name][lo:hi]
        may_reset = w in maybe_ended[name]
        maybe_ended[name].discard(w)
    if got == want:
        return True
    if may_reset and got == bases[base_of(name)][lo:hi]:
        with lock:
            model[name][lo:hi] = got
            counts['ended'] += 1
        return True
    fail('%s: worker %d: its quarter reads neither as written nor as the '
         'base' % (name, w))
    return False


def requests(h, name, lo, hi, rng):
    m = model[name]             # only this worker writes [lo, hi)
    for _ in range(rng.randint(3, 12)):
        op = rng.choice(['write', 'write', 'zero', 'trim', 'read', 'read'])
        off = rng.randrange(lo, hi - 1)
        n = rng.randint(1, min(hi - off, 100000))
        if op == 'write':
            data = rng.randbytes(n)
            h.pwrite(data, off)
            m[off:off + n] = data
        elif op == 'zero':
            h.zero(n, off, nbd.CMD_FLAG_NO_HOLE if rng.random() < 0.5 else 0)
            m[off:off + n] = bytes(n)
        elif op == 'trim':
            first = (off + BLOCK - 1) // BLOCK * BLOCK
            if first + BLOCK <= hi:
                h.trim(BLOCK, first)
                m[first:first + BLOCK] = bytes(BLOCK)
        else:
            if h.pread(n, off) != m[off:off + n]:
                fail('%s: a read at %d+%d differs from the model'
                     % (name, off, n))
                return
            with lock:
                counts['reads'] += 1


def session(w, rng):
    name = rng.choice(names)
    served = base_of(name) in bases
    h = nbd.NBD()
    h.set_export_name(name)
    if served:
        enter(name)
    try:
        h.connect_unix(sock)
    except nbd.Error as e:
        if served:
            fail('%r refused: %s' % (name, e))
        else:
            with lock:
                counts['refused'] += 1
        return
    if not served:
        fail('%r served: the plugin has no %r' % (name, base_of(name)))
        return
    joined(name)
    lo, hi = w * QUARTER, (w + 1) * QUARTER
    try:
        if check_quarter(h, name, w, lo, hi):
            requests(h, name, lo, hi, rng)
        if rng.random() < 0.5:
            h.shutdown()
        else:
            with lock:
                counts['drops'] += 1
    except nbd.Error as e:
        fail('%r: %s' % (name, e))
    del h                       # closes it, without NBD_CMD_DISC unless shut down
    leave(name)
    with lock:
        counts['sessions'] += 1


def worker(w):
    rng = random.Random(int(seed) * WORKERS + w)
    while time.monotonic() < stop and not failures:
        try:
            session(w, rng)
        except Exception as e:
            fail('worker %d: %r' % (w, e))
        time.sleep(rng.choice([0, 0, 0.01, 0.1]))


threads = [threading.Thread(target=worker, args=(w,)) for w in range(WORKERS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(counts))
if failures:
    print('\n'.join(failures[:5]), file=sys.stderr)
    sys.exit(1)
