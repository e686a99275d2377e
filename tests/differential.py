# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The same random requests through our cow filter and through the
# distribution's, each over the same stack of nbdkit plugin and
# filters, every read checked against a model of the disk.
#
# usage: differential.py NBDKIT SYSTEM-NBDKIT REFERENCE-FILTER SEED OPS
#                        NAME STACK...
#
# STACK is what follows the cow filter on nbdkit's command line: the
# filters below it, the plugin and every parameter (cow-* ones are
# given to both cow filters).  Three servers run it: the stack alone
# (the base, read once, is the model's start) and with the reference
# filter by path (none if REFERENCE-FILTER is "-"), both by
# SYSTEM-NBDKIT, and ours by NBDKIT (./nbdkit,
# which maps --filter=cow to this tree's filter, and runs it under
# valgrind or a sanitizer runtime for those suites).
#
# Requests are those of a well-behaved client: aligned to the larger
# of the two servers' minimum block sizes, then each split into pieces
# of at most the maximum the server advertises; zeroes become writes of
# zeros where a server does not advertise them, fast zeroes fall back
# to plain ones when refused, FUA only where advertised.  A request
# that fails on a server makes its bytes unknown in that server's
# model.  Where the two filters differ on purpose the model allows
# both: a trimmed byte may read as before or as zero (ours leaves the
# partial blocks of a trim alone, nbdkit 1.32's zeroes them), and a
# base extent that says zero is trusted (ours then reads no block of
# it), so the stacks here report their extents truthfully.
#
# Prints one line: NAME, requests, errors ours/reference, wrong reads
# ours/reference; exits 1 if ours failed any request (every stack here
# is healthy: no request of a well-behaved client should fail, whatever
# the reference does), or read a wrong byte.

import os
import random
import subprocess
import sys
import tempfile
import time

import nbd

EXACT, ZERO_OR_OLD, UNKNOWN = 0, 1, 2

nbdkit, system_nbdkit, reference, seed, ops, name = sys.argv[1:7]
stack = sys.argv[7:]
rng = random.Random(int(seed))
scratch = tempfile.mkdtemp(prefix="differential.", dir=os.environ.get("TMPDIR"))


class Server:
    """nbdkit serving args on a socket of its own, and a client of it."""

    def __init__(self, label, program, args):
        self.label = label
        sock = os.path.join(scratch, label + ".sock")
        pidfile = os.path.join(scratch, label + ".pid")
        self.err = open(os.path.join(scratch, label + ".err"), "w+")
        # nbdkit writes its pid file once it listens.
        self.proc = subprocess.Popen([program, "-f", "-U", sock,
                                      "-P", pidfile] + args,
                                     stderr=self.err)
        for _ in range(600):
            if os.path.exists(pidfile) or self.proc.poll() is not None:
                break
            time.sleep(0.05)
        if self.proc.poll() is not None:
            self.err.seek(0)
            sys.exit("%s: nbdkit exited at start:\n%s" % (label,
                                                           self.err.read()))
        self.h = nbd.NBD()
        self.h.set_strict_mode(0)         # we split; refusals are the server's
        self.h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
        self.h.connect_uri("nbd+unix:///?socket=" + sock)
        self.size = self.h.get_size()
        self.minimum = max(1, self.h.get_block_size(nbd.SIZE_MINIMUM))
        maximum = self.h.get_block_size(nbd.SIZE_MAXIMUM)
        self.maximum = maximum if maximum else 0xffffffff
        self.maximum = min(self.maximum, 32 << 20)    # libnbd's own limit
        self.errors = 0
        self.wrong = 0

    def stop(self):
        try:
            self.h.shutdown()
        except nbd.Error:
            pass
        del self.h
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            # Under a sanitizer runtime nbdkit can hang in a destructor
            # as it exits (tests/functions.sh, stop_nbdkit).
            self.proc.kill()
            self.proc.wait()
        self.err.seek(0)
        return self.err.read()

    def pieces(self, offset, count):
        """The requests a client splits [offset, offset+count) into."""
        step = self.maximum - self.maximum % self.minimum
        while count > 0:
            n = min(count, step)
            yield offset, n
            offset += n
            count -= n

    def each(self, offset, count, fn):
        """fn(offset, count) for every piece; False if any failed."""
        ok = True
        for o, n in self.pieces(offset, count):
            try:
                fn(o, n)
            except nbd.Error:
                ok = False
        if not ok:
            self.errors += 1
        return ok


def read_all(server):
    data = bytearray()
    for o, n in server.pieces(0, server.size):
        data += server.h.pread(n, o)
    return data


class Model:
    """What each byte of a server's disk must read as."""

    def __init__(self, base):
        self.data = bytearray(base)
        self.kind = bytearray(len(base))

    def set(self, offset, data):
        self.data[offset:offset + len(data)] = data
        self.kind[offset:offset + len(data)] = bytes(len(data))

    def loosen(self, offset, count, kind):
        table = bytes(max(k, kind) for k in range(256))
        self.kind[offset:offset + count] = \
            self.kind[offset:offset + count].translate(table)

    def wrong_bytes(self, offset, got):
        want = self.data[offset:offset + len(got)]
        if got == want:
            return 0
        wrong = 0
        for i, b in enumerate(got):
            k = self.kind[offset + i]
            if k == EXACT and b != want[i]:
                wrong += 1
            elif k == ZERO_OR_OLD and b != want[i] and b != 0:
                wrong += 1
        return wrong

    def claims_zero_wrongly(self, offset, length):
        """Whether a byte known exactly in the range is not zero."""
        for at in range(offset, offset + length, 4096):
            end = min(offset + length, at + 4096)
            data = self.data[at:end]
            if not any(data):
                continue
            kind = self.kind[at:end]
            if not any(kind):
                return True
            if any(k == EXACT and d for k, d in zip(kind, data)):
                return True
        return False


plain = Server("base", system_nbdkit,
               [a for a in stack if not a.startswith("cow-")])
base = read_all(plain)
plain.stop()
size = len(base)
servers = [Server("ours", nbdkit, ["--filter=cow"] + stack)]
if reference != "-":
    servers.append(Server("reference", system_nbdkit,
                          ["--filter=" + reference] + stack))
for s in servers:
    assert s.size == size, "%s: size %d, base %d" % (s.label, s.size, size)
    s.model = Model(base)
align = max(s.minimum for s in servers)


def pick_range():
    units = (size + align - 1) // align
    start = rng.randrange(units) * align
    n = rng.choice([1, 1, 2, 3, 8, 17, 64, 300]) * align
    if rng.randrange(8) == 0:
        n = size                            # up to the end
    return start, min(size, start + n) - start


def do_read(s, offset, count):
    def read(o, n):
        got = s.h.pread(n, o)
        wrong = s.model.wrong_bytes(o, got)
        if wrong:
            print("%s: %s: read %d+%d: %d wrong bytes"
                  % (name, s.label, o, n, wrong), file=sys.stderr)
            s.wrong += 1
    return s.each(offset, count, read)


def do_write(s, offset, data, fua):
    flags = nbd.CMD_FLAG_FUA if fua and s.h.can_fua() else 0
    ok = s.each(offset, len(data),
                lambda o, n: s.h.pwrite(data[o - offset:o - offset + n], o,
                                        flags))
    if ok:
        s.model.set(offset, data)
    else:
        s.model.loosen(offset, len(data), UNKNOWN)
    return ok


def do_zero(s, offset, count, flags):
    if not s.h.can_zero():
        return do_write(s, offset, bytes(count), False)
    if flags & nbd.CMD_FLAG_FAST_ZERO and not s.h.can_fast_zero():
        flags &= ~nbd.CMD_FLAG_FAST_ZERO

    def zero(o, n):
        try:
            s.h.zero(n, o, flags)
        except nbd.Error as e:
            if not flags & nbd.CMD_FLAG_FAST_ZERO or e.errno != "ENOTSUP":
                raise
            s.h.zero(n, o, flags & ~nbd.CMD_FLAG_FAST_ZERO)
    ok = s.each(offset, count, zero)
    if ok:
        s.model.set(offset, bytes(count))
    else:
        s.model.loosen(offset, count, UNKNOWN)
    return ok


def do_trim(s, offset, count):
    if not s.h.can_trim():
        return True
    ok = s.each(offset, count, lambda o, n: s.h.trim(n, o))
    s.model.loosen(offset, count, ZERO_OR_OLD if ok else UNKNOWN)
    return ok


def do_cache(s, offset, count):
    if not s.h.can_cache():
        return True
    return s.each(offset, count, lambda o, n: s.h.cache(n, o))


def do_extents(s, offset, count):
    def extents(o, n):
        def found(metacontext, at, entries, err):
            for i in range(0, len(entries), 2):
                length, flags = entries[i], entries[i + 1]
                length = min(length, size - at)
                if flags & nbd.STATE_ZERO and s.model.claims_zero_wrongly(at, length):
                    print("%s: %s: extent %d+%d says zero, is not"
                          % (name, s.label, at, length), file=sys.stderr)
                    s.wrong += 1
                at += length
        s.h.block_status(n, o, found)
    return s.each(offset, count, extents)


def do_flush(s):
    try:
        s.h.flush()
        return True
    except nbd.Error:
        s.errors += 1
        return False


bad = []
requests = 0
for i in range(int(ops)):
    offset, count = pick_range()
    op = rng.randrange(20)
    data = rng.randbytes(count) if op < 6 else None
    fua = rng.randrange(4) == 0
    zflags = rng.choice([0, nbd.CMD_FLAG_NO_HOLE, nbd.CMD_FLAG_FAST_ZERO,
                         nbd.CMD_FLAG_NO_HOLE | nbd.CMD_FLAG_FAST_ZERO])
    results = []
    for s in servers:
        if op < 6:
            results.append(do_write(s, offset, data, fua))
        elif op < 9:
            results.append(do_zero(s, offset, count, zflags))
        elif op < 11:
            results.append(do_trim(s, offset, count))
        elif op < 12:
            results.append(do_cache(s, offset, count))
        elif op < 14:
            results.append(do_extents(s, offset, count))
        elif op < 15:
            results.append(do_flush(s))
        else:
            results.append(do_read(s, offset, count))
    requests += 1
    if not results[0]:
        bad.append("request %d (op %d, %d+%d) failed on ours%s"
                   % (i, op, offset, count,
                      " only" if results[1:] == [True] else ""))

# The whole disk, read back.
for s in servers:
    do_read(s, 0, size)
requests += 1

ours, ref = servers[0], servers[-1]
messages = [s.stop() for s in servers]
if ours.wrong:
    bad.append("ours read %d wrong" % ours.wrong)
if ref is ours:
    print("%-34s %6d  %4d %4s  %4d %4s"
          % (name, requests, ours.errors, "-", ours.wrong, "-"))
else:
    print("%-34s %6d  %4d %4d  %4d %4d"
          % (name, requests, ours.errors, ref.errors, ours.wrong, ref.wrong))
for b in bad:
    print("%s: %s" % (name, b), file=sys.stderr)
if bad:
    print("%s: ours said:\n%s" % (name, messages[0]), file=sys.stderr)
    sys.exit(1)
