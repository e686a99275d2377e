# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Four connections writing, zeroing and trimming an export at random,
# and the model of the disk they give at any instant: what the tests
# of point-in-time views (view-torture.py, backup-chain.py) check their
# reads against.  Each writer owns every fourth block and sends one
# request at a time inside one of them (parts of units, whole units,
# whole blocks), so the disk at an instant is known exactly from the
# requests that ended before it was asked for, but for those under way
# meanwhile, which lie wholly on one side each: a byte they touched may
# read as after any of them.

import random
import threading
import time

import nbd

BLOCK = 65536
WRITERS = 4
now = time.monotonic_ns


class Writers:
    def __init__(self, sock, base_path, seed):
        self.sock = sock
        self.seed = int(seed)
        self.disk = bytearray(open(base_path, "rb").read())
        self.size = len(self.disk)
        self.blocks = self.size // BLOCK
        self.lock = threading.Lock()
        self.logs = [[] for _ in range(WRITERS)]  # (start, end, offset, data)
        self.started = [None] * WRITERS     # start of the request under way
        self.stopping = threading.Event()
        self.threads = [threading.Thread(target=self.writer, args=(w,))
                        for w in range(WRITERS)]

    def request(self, rng, w):
        """A request inside one of w's blocks: (kind, offset, length)."""
        b = rng.randrange(w, self.blocks, WRITERS)
        kind = rng.choice(["write"] * 6 + ["zero", "trim", "whole"])
        if kind in ("trim", "whole"):
            return kind, b * BLOCK, BLOCK
        length = rng.choice([512, 4096, 4096, 12288, 20000])
        return (kind, b * BLOCK + rng.randrange(0, BLOCK - length + 1, 512),
                length)

    def writer(self, w):
        rng = random.Random(self.seed * 10 + w)
        h = nbd.NBD()
        h.connect_uri("nbd+unix:///?socket=" + self.sock)
        while not self.stopping.is_set():
            kind, offset, length = self.request(rng, w)
            data = (bytes(length) if kind in ("zero", "trim")
                    else rng.randbytes(length))
            with self.lock:
                self.started[w] = start = now()
            if kind == "trim":
                h.trim(length, offset)
            elif kind == "zero":
                h.zero(length, offset)
            else:
                h.pwrite(data, offset)
            with self.lock:
                self.logs[w].append((start, now(), offset, data))
                self.started[w] = None
        h.shutdown()

    def start(self):
        for t in self.threads:
            t.start()

    def stop(self):
        self.stopping.set()
        for t in self.threads:
            t.join()

    def settle(self, t1):
        """Waits until every request that began before t1 has ended."""
        while True:
            with self.lock:
                if all(s is None or s > t1 for s in self.started):
                    return
            time.sleep(0.001)

    def model_at(self, t0, t1):
        """Folds into the disk the requests that ended before t0, and
        returns it, with the contents each block touched by a request
        under way between t0 and t1 may have: as after any of its
        writer's requests in order, the instant lying between two of
        them.  Call after settle (t1), instants in order."""
        maybe = {}
        disk = self.disk
        with self.lock:
            for w in range(WRITERS):
                keep = []
                for start, end, offset, data in self.logs[w]:
                    if end < t0:
                        disk[offset:offset + len(data)] = data
                    else:
                        keep.append((start, end, offset, data))
                self.logs[w] = keep
            for w in range(WRITERS):
                for start, end, offset, data in self.logs[w]:
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

    def touched(self, since_t0, since_t1, t0, t1):
        """The blocks a request between two instants surely touched,
        and those one may have touched."""
        surely, maybe = set(), set()
        with self.lock:
            for w in range(WRITERS):
                for start, end, offset, data in self.logs[w]:
                    b = offset // BLOCK
                    if start > since_t1 and end < t0:
                        surely.add(b)
                    if end >= since_t0 and start < t1:
                        maybe.add(b)
        return surely, maybe


def mismatch(got, model, maybe):
    """The first block of got (the whole disk) that is as the disk
    never was at the instant of model and maybe, or None."""
    if got == model:
        return None
    for b in range(len(model) // BLOCK):
        block = got[b * BLOCK:(b + 1) * BLOCK]
        if block not in maybe.get(b, [model[b * BLOCK:(b + 1) * BLOCK]]):
            return b
    return None
