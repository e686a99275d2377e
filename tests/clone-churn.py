#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Connect, write, read, disconnect churn over a few clone names whose
# overlays end with their clients, checking every read against a model:
#   clone-churn.py SOCKET temp|kept SECONDS GRACE GOLDEN COW_ON_READ_PATH
# One worker per name runs sessions one after another: each opens two
# connections, which first read the whole disk (a throw-away clone
# must read as the model or, if its overlay ended meanwhile, as the
# golden image; a kept one as the model), then write, zero, trim,
# flush, cache and read their own half of the disk at once, then
# disconnect, and reconnect at once or after three times the grace, in
# turn at random.  Meanwhile a thread turns
# cow-on-read on and off.  Prints one JSON object: sessions, how many
# found their overlay ended, and how many found it alive.
import json
import os
import random
import sys
import threading
import time

import nbd

sock, mode, seconds, grace, golden_path, toggle = sys.argv[1:7]
seconds, grace = float(seconds), float(grace)
golden = open(golden_path, 'rb').read()
size = len(golden)
BLOCK = 65536
names = ['golden@churn%d' % i for i in range(3)]
stop = time.monotonic() + seconds
lock = threading.Lock()
counts = {'sessions': 0, 'ended': 0, 'alive': 0}
failures = []


def conn(name):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix(sock)
    return h


def work_half(h, model, lo, hi, rng):
    """Requests of one connection inside [lo, hi) of the disk."""
    for _ in range(rng.randint(5, 20)):
        op = rng.choice(['write', 'write', 'zero', 'trim', 'flush', 'cache',
                         'read', 'read'])
        off = rng.randrange(lo, hi - 1)
        n = rng.randint(1, min(hi - off, 200000))
        if op == 'write':
            data = os.urandom(n)
            h.pwrite(data, off)
            model[off:off + n] = data
        elif op == 'zero':
            h.zero(n, off, nbd.CMD_FLAG_NO_HOLE if rng.random() < 0.5 else 0)
            model[off:off + n] = bytes(n)
        elif op == 'trim':
            first = (off + BLOCK - 1) // BLOCK * BLOCK
            if first + BLOCK <= hi:
                h.trim(BLOCK, first)
                model[first:first + BLOCK] = bytes(BLOCK)
        elif op == 'flush':
            h.flush()
        elif op == 'cache':
            h.cache(n, off)
        else:
            got = h.pread(n, off)
            if got != model[off:off + n]:
                raise AssertionError('read %d at %d differs' % (n, off))


def session(name, model, rng):
    hs = [conn(name), conn(name)]
    now = hs[0].pread(size, 0)
    with lock:
        counts['sessions'] += 1
        if now == bytes(model):
            counts['alive'] += model != golden
        elif mode == 'temp' and now == golden:
            counts['ended'] += 1
            model[:] = golden
        else:
            raise AssertionError('%s reads as neither its model nor the '
                                 'golden image' % name)
    half = size // 2 // BLOCK * BLOCK
    errors = []

    def run(h, lo, hi, seed):
        try:
            work_half(h, model, lo, hi, random.Random(seed))
        except Exception as e:
            errors.append(e)
    ts = [threading.Thread(target=run, args=(hs[0], 0, half, rng.random())),
          threading.Thread(target=run, args=(hs[1], half, size,
                                             rng.random()))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    if hs[1].pread(size, 0) != bytes(model):
        raise AssertionError('%s: the whole disk differs' % name)
    for h in hs:
        h.shutdown()


def worker(name, seed):
    rng = random.Random(seed)
    model = bytearray(golden)
    try:
        while time.monotonic() < stop:
            session(name, model, rng)
            time.sleep(rng.choice([0, 3 * grace]))
    except Exception as e:
        failures.append('%s: %r' % (name, e))


def toggler():
    while time.monotonic() < stop:
        if os.path.exists(toggle):
            os.unlink(toggle)
        else:
            open(toggle, 'w').close()
        time.sleep(0.05)


threads = [threading.Thread(target=worker, args=(n, i))
           for i, n in enumerate(names)]
threads.append(threading.Thread(target=toggler))
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(dict(counts, failures=failures)))
sys.exit(1 if failures else 0)
