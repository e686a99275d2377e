# Four clients at work while a fill runs, for the tests of cow-fill:
#   fill-clients.py URI BASE STATS GO WANT
# Writes twice into the default export, waits for its fill to be
# paused (cow-fill=GO), creates GO, then four clients, each on its own
# connection and its own 64 KiB units (unit % 4), write and read at
# random until the statistics in STATS say the fill is complete, every
# read checked against a model of the disk (the base and the writes).
# Then the whole disk is read and checked, and the model is written to
# WANT.  Fails on the first wrong byte.

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


def write(h, data, offset):
    h.pwrite(data, offset)
    model[offset:offset + len(data)] = data


def client(i, errors):
    rng = random.Random(i)
    h = nbd.NBD()
    h.connect_uri(uri)
    units = [u for u in range(size // UNIT) if u % CLIENTS == i]
    ops = 0
    try:
        while ops < MIN_OPS or fill_state() != 'complete':
            unit = rng.choice(units)
            start = unit * UNIT + rng.randrange(UNIT)
            length = rng.randrange(1, unit * UNIT + UNIT - start + 1)
            if rng.random() < 0.4:
                write(h, rng.randbytes(length), start)
            else:
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
for t in threads:
    t.start()
for t in threads:
    t.join()
if errors:
    sys.exit(errors[0])
for at in range(0, size, 1024 * 1024):
    if h.pread(1024 * 1024, at) != model[at:at + 1024 * 1024]:
        sys.exit('MiB %d reads wrong after the fill' % (at // 1024 // 1024))
h.shutdown()
open(want_path, 'wb').write(model)
print('four clients read right while the fill ran to complete')
