# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Point-in-time views made and deleted at random moments while four
# connections write, zero and trim: every read of a view, and every
# extent it reports as zero, is what the disk held at its instant.
# Each writer owns every fourth block and sends one request at a time
# inside one of them (parts of units, whole units, whole blocks), so
# the disk at an instant is known exactly from the requests that ended
# before the view was asked for, but for those under way during the
# call, which lie wholly on one side each: a byte they touched may read
# as after any of them.  The changes view of each view since the
# checkpoint of the one before reports as changed every block that a
# request which began after that one and ended before this one touched,
# and as unchanged every block no request touched meanwhile.
#
# usage: view-torture.py SOCKET CONTROL NBDCOW BASE ROUNDS SEED

import random
import subprocess
import sys
import threading
import time

import nbd

sock, control, nbdcow, base_path, rounds, seed = sys.argv[1:7]
rounds = int(rounds)
BLOCK = 65536
WRITERS = 4
disk = bytearray(open(base_path, "rb").read())
size = len(disk)
blocks = size // BLOCK
lock = threading.Lock()
logs = [[] for _ in range(WRITERS)]     # (start, end, offset, data)
started = [None] * WRITERS              # start of the request under way
stop = threading.Event()
now = time.monotonic_ns


def fail(msg):
    print("view-torture: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def request(rng, w):
    """A request inside one of w's blocks: (kind, offset, length)."""
    b = rng.randrange(w, blocks, WRITERS)
    kind = rng.choice(["write"] * 6 + ["zero", "trim", "whole"])
    if kind in ("trim", "whole"):
        return kind, b * BLOCK, BLOCK
    length = rng.choice([512, 4096, 4096, 12288, 20000])
    return kind, b * BLOCK + rng.randrange(0, BLOCK - length + 1, 512), length


def writer(w):
    rng = random.Random(int(seed) * 10 + w)
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///?socket=" + sock)
    while not stop.is_set():
        kind, offset, length = request(rng, w)
        data = (bytes(length) if kind in ("zero", "trim")
                else rng.randbytes(length))
        with lock:
            started[w] = start = now()
        if kind == "trim":
            h.trim(length, offset)
        elif kind == "zero":
            h.zero(length, offset)
        else:
            h.pwrite(data, offset)
        with lock:
            logs[w].append((start, now(), offset, data))
            started[w] = None
    h.shutdown()


def nbdcow_view(*args):
    r = subprocess.run([nbdcow, "view"] + list(args), capture_output=True,
                       text=True)
    if r.returncode != 0:
        fail("nbdcow view %s: %s" % (" ".join(args), r.stderr))
    return r.stdout


def settle(t1):
    """Waits until every request that began before t1 has ended."""
    while True:
        with lock:
            if all(s is None or s > t1 for s in started):
                return
        time.sleep(0.001)


def model_at(t0, t1):
    """Folds into disk the requests that ended before t0, and returns
    it, with the contents each block touched by a request under way
    between t0 and t1 may have: as after any of its writer's requests
    in order, the view's instant lying between two of them."""
    maybe = {}
    with lock:
        for w in range(WRITERS):
            keep = []
            for start, end, offset, data in logs[w]:
                if end < t0:
                    disk[offset:offset + len(data)] = data
                else:
                    keep.append((start, end, offset, data))
            logs[w] = keep
        for w in range(WRITERS):
            for start, end, offset, data in logs[w]:
                if start >= t1:
                    break
                b = offset // BLOCK
                states = maybe.setdefault(
                    b, [bytes(disk[b * BLOCK:(b + 1) * BLOCK])])
                block = bytearray(states[-1])
                at = offset - b * BLOCK
                block[at:at + len(data)] = data
                states.append(bytes(block))
    return bytes(disk), maybe


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


def touched(since_t0, since_t1, t0, t1):
    """The blocks a request between two instants surely touched, and
    those one may have touched."""
    surely, maybe = set(), set()
    with lock:
        for w in range(WRITERS):
            for start, end, offset, data in logs[w]:
                b = offset // BLOCK
                if start > since_t1 and end < t0:
                    surely.add(b)
                if end >= since_t0 and start < t1:
                    maybe.add(b)
    return surely, maybe


threads = [threading.Thread(target=writer, args=(w,)) for w in range(WRITERS)]
for t in threads:
    t.start()
rng = random.Random(int(seed))
previous = None
try:
    for r in range(rounds):
        time.sleep(rng.uniform(0.05, 0.3))
        name = "v%d" % r
        t0 = now()
        nbdcow_view("create", control, "", name)
        t1 = now()
        settle(t1)
        if previous:
            p_name, p_t0, p_t1 = previous
            surely, maybe = touched(p_t0, p_t1, t0, t1)
            changed = changed_blocks(name, p_name)
            for b in range(blocks):
                if b in surely and not changed[b]:
                    fail("view %s since %s: block %d changed, reported not" %
                         (name, p_name, b))
                if changed[b] and b not in maybe:
                    fail("view %s since %s: block %d reported changed, no "
                         "request touched it" % (name, p_name, b))
        model, maybe = model_at(t0, t1)
        for _ in range(rng.randint(1, 3)):
            check_view(name, model, maybe)
        shown = nbdcow_view("show", control, "")
        if "view: %s\n" % name not in shown or "state: live" not in shown:
            fail("view %s shown as: %s" % (name, shown))
        nbdcow_view("delete", control, "", name)
        previous = (name, t0, t1)
finally:
    stop.set()
    for t in threads:
        t.join()
print("view-torture: %d views, every read as at its instant" % rounds)
