# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Checkpoints made while four connections write, zero and trim at
# random: every write lies wholly on one side of each checkpoint.  For
# each checkpoint and block, the view since it must report the block
# changed if a write that began after the checkpoint was made touched
# it, and unchanged if every write touching it had completed before;
# the blocks of a write in flight, touched by nothing later, lie all on
# one side.
#
# usage: checkpoint-race.py SOCKET CONTROL NBDCOW ROUNDS SEED

import random
import subprocess
import sys
import threading
import time

import nbd

sock, control, nbdcow, rounds, seed = sys.argv[1:6]
rounds = int(rounds)
B = 4096
log = []                        # (start, end, first block, blocks)
log_lock = threading.Lock()
stop = threading.Event()


def writer(i):
    rng = random.Random(int(seed) * 10 + i)
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///?socket=" + sock)
    blocks = h.get_size() // B
    while not stop.is_set():
        n = rng.randint(1, 4)
        first = rng.randrange(blocks - n)
        kind = rng.randrange(10)
        start = time.monotonic_ns()
        if kind == 0:
            h.trim(n * B, first * B)
        elif kind == 1:
            h.zero(n * B, first * B)
        else:
            h.pwrite(rng.randbytes(n * B), first * B)
        end = time.monotonic_ns()
        with log_lock:
            log.append((start, end, first, n))
    h.shutdown()


def changed_blocks(name, blocks):
    h = nbd.NBD()
    h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
    h.connect_uri("nbd+unix:///+%s?socket=%s" % (name, sock))
    changed = [False] * blocks
    offset = 0
    size = blocks * B

    def found(metacontext, at, entries, err):
        nonlocal offset
        for k in range(0, len(entries), 2):
            length, flags = entries[k], entries[k + 1]
            if flags != nbd.STATE_HOLE:
                for b in range(offset // B, (offset + length) // B):
                    changed[b] = True
            offset += length
        return 0

    while offset < size:
        h.block_status(min(size - offset, 1 << 30), offset, found)
    h.shutdown()
    return changed


threads = [threading.Thread(target=writer, args=(i,)) for i in range(4)]
for t in threads:
    t.start()
made = []                       # (name, before, after)
for r in range(rounds):
    time.sleep(0.2)
    before = time.monotonic_ns()
    subprocess.run([nbdcow, "checkpoint", "create", control, "", "r%d" % r],
                   check=True)
    made.append(("r%d" % r, before, time.monotonic_ns()))
time.sleep(0.2)
stop.set()
for t in threads:
    t.join()

probe = nbd.NBD()
probe.connect_uri("nbd+unix:///?socket=" + sock)
blocks = probe.get_size() // B
probe.shutdown()
errors = 0
for name, before, after in made:
    changed = changed_blocks(name, blocks)
    touched = [[] for _ in range(blocks)]   # writes of each block
    for w in log:
        for b in range(w[2], w[2] + w[3]):
            touched[b].append(w)
    in_flight = 0
    for b in range(blocks):
        later = any(w[0] > after for w in touched[b])
        earlier_only = all(w[1] < before for w in touched[b])
        if later and not changed[b]:
            print("%s: block %d, written after it, reported unchanged" %
                  (name, b))
            errors += 1
        if earlier_only and changed[b]:
            print("%s: block %d, written only before it, reported changed"
                  % (name, b))
            errors += 1
    for w in log:
        if w[1] < before or w[0] > after:
            continue
        in_flight += 1
        alone = [b for b in range(w[2], w[2] + w[3])
                 if all(v is w or v[1] < before for v in touched[b])]
        if len(set(changed[b] for b in alone)) > 1:
            print("%s: a write in flight split across it: blocks %s" %
                  (name, [(b, changed[b]) for b in alone]))
            errors += 1
    print("%s: %d writes in all, %d in flight while it was made" %
          (name, len(log), in_flight))
sys.exit(1 if errors else 0)
