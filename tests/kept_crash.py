# Crash test of cow-file (tests/test-kept-crash.sh): rounds of random
# writes, zeroes and flushes with many requests in flight, ended by
# kill -9 at a random moment; after each restart every unit must read
# as its last flushed value or as one written after it, never older,
# never anything else.
#
# usage: kept_crash.py NBDKIT BASE OVERLAY SOCKET ROUNDS SEED

import os
import random
import signal
import subprocess
import sys
import time

import nbd

nbdkit, base, overlay, sock, rounds, seed = sys.argv[1:7]
rounds, seed = int(rounds), int(seed)
rng = random.Random(seed)
UNIT = 4096
size = os.path.getsize(base)
units = size // UNIT
IN_FLIGHT = 16

with open(base, 'rb') as f:
    base_data = f.read()
# values[u]: what unit u has held, in write order; durable[u]: index
# of the oldest value a crash may bring back.
values = [[base_data[u * UNIT:(u + 1) * UNIT]] for u in range(units)]
durable = [0] * units


def start():
    if os.path.exists(sock):
        os.unlink(sock)
    p = subprocess.Popen([nbdkit, '-f', '-U', sock, '--filter=cow', 'file',
                          base, 'cow-file=' + overlay],
                         stderr=open(overlay + '.err', 'a'))
    for _ in range(200):
        if os.path.exists(sock):
            return p
        time.sleep(0.05)
    sys.exit('nbdkit did not start')


def fail(msg):
    sys.exit('FAIL: ' + msg)


def verify(h):
    for u in range(units):
        got = bytes(h.pread(UNIT, u * UNIT))
        allowed = values[u][durable[u]:]
        if got not in allowed:
            old = got in values[u]
            fail('unit %d after round %d reads %s' %
                 (u, r, 'a value older than the last flush' if old
                  else 'data never written there'))
        values[u] = [got]
        durable[u] = 0


def value(u, seq):
    stamp = b'%08d:%08d:' % (u, seq)
    return (stamp * (UNIT // len(stamp) + 1))[:UNIT]


seq = 0
for r in range(rounds):
    p = start()
    h = nbd.NBD()
    h.connect_unix(sock)
    verify(h)
    busy = set()                   # units with a write in flight
    completed = [0] * units        # index of the last completed value
    for u in range(units):
        completed[u] = len(values[u]) - 1
    deadline = time.time() + rng.uniform(0.05, 0.6)

    def write_done(u, index):
        def cb(err):
            busy.discard(u)
            if err.value == 0:
                completed[u] = max(completed[u], index)
            return 1
        return cb

    def flush_done(snapshot):
        def cb(err):
            if err.value == 0:
                for u, i in snapshot.items():
                    durable[u] = max(durable[u], i)
            return 1
        return cb

    while time.time() < deadline:
        while h.aio_in_flight() < IN_FLIGHT:
            if rng.random() < 0.05:
                snapshot = {u: completed[u] for u in range(units)}
                h.aio_flush(completion=flush_done(snapshot))
                continue
            u = rng.randrange(units)
            if u in busy:
                break
            busy.add(u)
            seq += 1
            if rng.random() < 0.1:
                values[u].append(bytes(UNIT))
                h.aio_zero(UNIT, u * UNIT,
                           completion=write_done(u, len(values[u]) - 1))
            else:
                values[u].append(value(u, seq))
                h.aio_pwrite(values[u][-1], u * UNIT,
                             completion=write_done(u, len(values[u]) - 1))
        h.poll(-1)
    # Requests are still in flight: the crash comes now.
    p.send_signal(signal.SIGKILL)
    p.wait()
    try:
        h.close()
    except Exception:
        pass
    del h

p = start()
h = nbd.NBD()
h.connect_unix(sock)
r = rounds
verify(h)
h.shutdown()
p.terminate()
p.wait()
print('kept_crash: %d rounds, %d writes, nothing flushed lost' % (rounds, seq))
