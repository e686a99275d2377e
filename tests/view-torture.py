# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Point-in-time views made and deleted at random moments while four
# connections write, zero and trim (diskwriters.py): every read of a
# view, and every extent it reports as zero, is what the disk held at
# its instant.  The changes view of each view since the
# checkpoint of the one before reports as changed every block that a
# request which began after that one and ended before this one touched,
# and as unchanged every block no request touched meanwhile.
#
# usage: view-torture.py SOCKET CONTROL NBDCOW BASE ROUNDS SEED

import random
import subprocess
import sys
import time

import nbd

from diskwriters import BLOCK, Writers, now

sock, control, nbdcow, base_path, rounds, seed = sys.argv[1:7]
rounds = int(rounds)
writers = Writers(sock, base_path, seed)
size, blocks = writers.size, writers.blocks


def fail(msg):
    print("view-torture: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def nbdcow_view(*args):
    r = subprocess.run([nbdcow, "view"] + list(args), capture_output=True,
                       text=True)
    if r.returncode != 0:
        fail("nbdcow view %s: %s" % (" ".join(args), r.stderr))
    return r.stdout


def extents(h, found):
    at = 0
    while at < size:
        ends = [at]

        def cb(metacontext, offset, entries, err):
            for i in range(0, len(entries), 2):
                found(offset, entries[i], entries[i + 1])
                offset += entries[i]
            ends[0] = offset

        h.block_status(min(size - at, 1 << 30), at, cb)
        if ends[0] <= at:
            fail("no extents at %d" % at)
        at = ends[0]


def check_view(name, model, maybe):
    h = nbd.NBD()
    h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
    h.connect_uri("nbd+unix:///@%s?socket=%s" % (name, sock))
    if h.is_read_only() != 1:
        fail("view %s is writable" % name)
    step = 1 << 20
    for at in range(0, size, step):
        got = h.pread(step, at)
        if got == model[at:at + step]:
            continue
        for b in range(at // BLOCK, (at + step) // BLOCK):
            block = got[b * BLOCK - at:(b + 1) * BLOCK - at]
            if block not in maybe.get(b, [model[b * BLOCK:(b + 1) * BLOCK]]):
                fail("view %s: block %d reads as the disk never was" %
                     (name, b))

    def zero_holds(offset, length, flags):
        if not flags & nbd.STATE_ZERO:
            return
        for b in range(offset // BLOCK, (offset + length - 1) // BLOCK + 1):
            lo, hi = max(offset, b * BLOCK), min(offset + length,
                                                 (b + 1) * BLOCK)
            states = maybe.get(b, [model[b * BLOCK:(b + 1) * BLOCK]])
            if not any(st[lo - b * BLOCK:hi - b * BLOCK].count(0) == hi - lo
                       for st in states):
                fail("view %s: a zero extent in block %d holds data" %
                     (name, b))

    extents(h, zero_holds)
    h.shutdown()


def changed_blocks(name, since):
    h = nbd.NBD()
    h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
    h.connect_uri("nbd+unix:///@%s+%s?socket=%s" % (name, since, sock))
    changed = [False] * blocks

    def note(offset, length, flags):
        if flags != nbd.STATE_HOLE:
            for b in range(offset // BLOCK, (offset + length - 1) // BLOCK + 1):
                changed[b] = True

    extents(h, note)
    h.shutdown()
    return changed


writers.start()
rng = random.Random(int(seed))
previous = None
try:
    for r in range(rounds):
        time.sleep(rng.uniform(0.05, 0.3))
        name = "v%d" % r
        t0 = now()
        nbdcow_view("create", control, "", name)
        t1 = now()
        writers.settle(t1)
        if previous:
            p_name, p_t0, p_t1 = previous
            surely, maybe = writers.touched(p_t0, p_t1, t0, t1)
            changed = changed_blocks(name, p_name)
            for b in range(blocks):
                if b in surely and not changed[b]:
                    fail("view %s since %s: block %d changed, reported not" %
                         (name, p_name, b))
                if changed[b] and b not in maybe:
                    fail("view %s since %s: block %d reported changed, no "
                         "request touched it" % (name, p_name, b))
        model, maybe = writers.model_at(t0, t1)
        for _ in range(rng.randint(1, 3)):
            check_view(name, model, maybe)
        shown = nbdcow_view("show", control, "")
        if "view: %s\n" % name not in shown or "state: live" not in shown:
            fail("view %s shown as: %s" % (name, shown))
        nbdcow_view("delete", control, "", name)
        previous = (name, t0, t1)
finally:
    writers.stop()
print("view-torture: %d views, every read as at its instant" % rounds)
