# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A chain of backups (nbdcow backup: a full one, then increments each
# over the one before) made at random moments while four connections
# write, zero and trim (diskwriters.py): each backup, its chain
# converted, is the disk at its instant; each increment holds only
# blocks a request may have touched since the backup before; the chain
# committed down into the full backup is the disk at the last instant.
#
# usage: backup-chain.py SOCKET CONTROL NBDCOW BASE ROUNDS SEED DIR

import json
import os
import random
import shutil
import subprocess
import sys
import time

from diskwriters import BLOCK, Writers, mismatch, now

sock, control, nbdcow, base_path, rounds, seed, work = sys.argv[1:8]
rounds = int(rounds)
writers = Writers(sock, base_path, seed)
uri = "nbd+unix:///?socket=" + sock


def fail(msg):
    print("backup-chain: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def run(*args):
    r = subprocess.run(list(args), capture_output=True, text=True)
    if r.returncode != 0:
        fail("%s: exit %d: %s" % (" ".join(args), r.returncode, r.stderr))
    return r.stdout


def backup(name, base):
    """Runs nbdcow backup NAME; returns the instants the view was made
    between: its start, and when the view was first seen or, if never,
    the backup's end."""
    args = [nbdcow, "backup"] + (["--base=" + base] if base else []) + \
        [control, uri, name, os.path.join(work, name + ".qcow2")]
    t0 = now()
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    t1 = None
    while p.poll() is None and t1 is None:
        shown = subprocess.run([nbdcow, "view", "show", control, ""],
                               capture_output=True, text=True).stdout
        if "view: %s\n" % name in shown:
            t1 = now()
    out, err = p.communicate()
    if t1 is None:
        t1 = now()
    if p.returncode != 0:
        fail("nbdcow backup %s: exit %d: %s" % (name, p.returncode, err))
    return t0, t1


def restored(name):
    raw = os.path.join(work, "restored.raw")
    run("qemu-img", "convert", "-O", "raw",
        os.path.join(work, name + ".qcow2"), raw)
    data = open(raw, "rb").read()
    os.unlink(raw)
    return data


def top_blocks(name):
    """The blocks the file itself (not its backing chain) maps."""
    found = set()
    for e in json.loads(run("qemu-img", "map", "--output=json",
                            os.path.join(work, name + ".qcow2"))):
        if e["depth"] == 0:
            found.update(range(e["start"] // BLOCK,
                               (e["start"] + e["length"] - 1) // BLOCK + 1))
    return found


writers.start()
rng = random.Random(int(seed))
previous = None
try:
    for r in range(rounds):
        time.sleep(rng.uniform(0.05, 0.3))
        name = "b%d" % r
        t0, t1 = backup(name, previous[0] + ".qcow2" if previous else None)
        writers.settle(t1)
        if previous:
            surely, maybe = writers.touched(previous[1], previous[2], t0, t1)
            extra = top_blocks(name) - maybe
            if extra:
                fail("increment %s holds block %d, which no request touched "
                     "since %s" % (name, min(extra), previous[0]))
        model, maybe = writers.model_at(t0, t1)
        b = mismatch(restored(name), model, maybe)
        if b is not None:
            fail("backup %s: block %d is as the disk never was" % (name, b))
        run("qemu-img", "check", os.path.join(work, name + ".qcow2"))
        previous = (name, t0, t1)
finally:
    writers.stop()

# The chain committed down into a copy of the full backup.
chain = os.path.join(work, "chain")
os.mkdir(chain)
for r in range(rounds):
    shutil.copy(os.path.join(work, "b%d.qcow2" % r), chain)
run("qemu-img", "commit", "-b", os.path.join(chain, "b0.qcow2"),
    os.path.join(chain, "b%d.qcow2" % (rounds - 1)))
work = chain
if mismatch(restored("b0"), model, maybe) is not None:
    fail("the chain committed down is not the disk at its last instant")
print("backup-chain: %d backups, each the disk at its instant" % rounds)
