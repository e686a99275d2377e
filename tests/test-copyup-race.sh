#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Guarantee 2: a completed write is never undone by a copy-up.  Over a
# slow base (nbdkit's delay filter below ours) one connection starts a
# cow-on-read read, a cow-on-cache cache, or the read half of a
# read-modify-write of a block; while its base read waits, another
# connection writes the same block and completes.  Afterwards the
# block must hold that write.  nbdkit 1.32's own filter loses it.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 16M "$tmp/base"
start_nbdkit "$tmp/sock" --filter=cow --filter=delay file "$tmp/base" \
  cow-on-read=true cow-on-cache=true delay-read=2
nbdsh -c '
import time
uri = "nbd+unix:///?socket='"$tmp/sock"'"
slow, fast = nbd.NBD(), nbd.NBD()
slow.connect_uri(uri)
fast.connect_uri(uri)
B = 65536

def race(name, block, start_slow, write):
    off = block * B
    cookie = start_slow(off)
    time.sleep(0.5)                  # the slow request is in its base read
    data = write(off)                # completes: the slow one must not undo it
    while not slow.aio_command_completed(cookie):
        slow.poll(-1)
    got = fast.pread(B, off)
    assert got == data, "%s: completed write lost" % name
    print(name, "ok")

def whole_write(off):
    fast.pwrite(b"W" * B, off)
    return b"W" * B

def partial_write(off):
    fast.pwrite(b"P" * 100, off + 1000)
    return bytes(1000) + b"P" * 100 + bytes(B - 1100)

def zero_block(off):
    fast.zero(B, off)
    return bytes(B)

buf = nbd.Buffer(B)
race("cow-on-read vs write", 1, lambda o: slow.aio_pread(buf, o), whole_write)
race("cow-on-read vs unaligned write", 2, lambda o: slow.aio_pread(buf, o), partial_write)
race("cow-on-cache vs write", 3, lambda o: slow.aio_cache(B, o), whole_write)
race("rmw vs write", 4, lambda o: slow.aio_pwrite(b"r" * 10, o + 5), whole_write)
race("cow-on-read vs zero", 5, lambda o: slow.aio_pread(buf, o), zero_block)
race("cow-on-read vs trim", 6, lambda o: slow.aio_pread(buf, o),
     lambda o: (fast.trim(B, o), bytes(B))[1])
'
