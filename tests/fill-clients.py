# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Four clients at work while a fill runs, for the tests of cow-fill:
#   fill-clients.py URI BASE STATS GO WANT
# Writes twice into the default export, waits for its fill to be
# paused (cow-fill=GO), creates GO, then four clients, each on its own
# connection and its own quarter of the disk, write (inside a block)
# and read (from one byte to 16 blocks, across blocks and the fill's
# requests) at random until the statistics in STATS say the fill is complete, every read
# checked against a model of the disk (the base and the writes).  Now
# and then they all stop together for longer than the fill's half
# second of giving way, so that it copies requests of several blocks,
# several at once, which the clients' requests then meet.
# Then the whole disk is read and checked, and the model is written to
# WANT, and to WANT.written the 4K sectors some write covered whole
# (their base data need never be read).  Fails on the first wrong byte.

import json
import random
import sys
import threading
import time

import nbd

uri, base_path, stats_path, go_path, want_path = sys.argv[1:6]
UNIT = 65536
CLIENTS = 4
MIN_OPS = 40

model = bytearray(open(base_path, 'rb').read())
size = len(model)


def fill_state():
    try:
        with open(stats_path) as f:
            return json.load(f)['exports'][0]['fill']['state']
    except (OSError, ValueError, KeyError, IndexError):
        return None


def wait_for(state):
    for _ in range(600):
        if fill_state() == state:
            return
        time.sleep(0.1)
    sys.exit('the fill is not %s but %s' % (state, fill_state()))


SECTOR = 4096
covered = set()                 # sectors a write covered whole


def write(h, data, offset):
    h.pwrite(data, offset)
    model[offset:offset + len(data)] = data
    covered.update(range((offset + SECTOR - 1) // SECTOR,
                         (offset + len(data)) // SECTOR))


# Set while the clients stop together (pauser).
quiet = threading.Event()


def pauser(done):
    while not done.wait(0.4):
        quiet.set()
        time.sleep(0.7)
        quiet.clear()


def client(i, errors):
    rng = random.Random(i)
    h = nbd.NBD()
    h.connect_uri(uri)
    lo = i * (size // CLIENTS)
    hi = size if i == CLIENTS - 1 else lo + size // CLIENTS
    ops = 0
    try:
        while ops < MIN_OPS or fill_state() != 'complete':
            while quiet.is_set():
                time.sleep(0.02)
            start = rng.randrange(lo, hi)
            if rng.random() < 0.4:
                # Inside a block, so that the fill still reads the rest.
                longest = UNIT - start % UNIT
                write(h, rng.randbytes(rng.randrange(1, longest + 1)), start)
            else:
                longest = min(hi - start,
                              rng.choice((UNIT, 4 * UNIT, 16 * UNIT)))
                length = rng.randrange(1, longest + 1)
                got = h.pread(length, start)
                if got != model[start:start + length]:
                    errors.append('client %d: %d bytes at %d read wrong' %
                                  (i, length, start))
                    return
            ops += 1
    finally:
        h.shutdown()


h = nbd.NBD()
h.connect_uri(uri)
# One write in a data run the fill has not reached, one in a hole.
write(h, b'w' * 4096, 12 * 1024 * 1024 + 100)
write(h, b'v' * 65536, 20 * 1024 * 1024)
wait_for('paused')
open(go_path, 'w').close()
errors = []
threads = [threading.Thread(target=client, args=(i, errors))
           for i in range(CLIENTS)]
done = threading.Event()
pausing = threading.Thread(target=pauser, args=(done,))
pausing.start()
for t in threads:
    t.start()
for t in threads:
    t.join()
done.set()
pausing.join()
if errors:
    sys.exit(errors[0])
for at in range(0, size, 1024 * 1024):
    if h.pread(1024 * 1024, at) != model[at:at + 1024 * 1024]:
        sys.exit('MiB %d reads wrong after the fill' % (at // 1024 // 1024))
h.shutdown()
open(want_path, 'wb').write(model)
with open(want_path + '.written', 'w') as f:
    f.write(''.join('%d\n' % u for u in sorted(covered)))
print('four clients read right while the fill ran to complete')
