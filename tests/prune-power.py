#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The power cut at every persistence point of nbdcow backup prune in
# turn (tests/power-dir.c), each way a power loss may leave the folder
# (tests/powerdir.py): after each, every backup prune keeps restores
# as before, the newest verifies, and prune run again finishes, the
# chain then the kept backups alone.
#
#   prune-power.py NBDCOW SHIM CHAIN WORK KEEP [--durable-only] NEWEST...
#
# CHAIN is the folder of the chain, never changed; its files are named
# newest first.  With --durable-only it cuts only at the syncs and the
# name changes (the points where a cut can leave more than the old
# chain): the instrumented suites' shorter run.

import os
import shutil
import subprocess
import sys
import time

import powerdir

nbdcow, shim, chain, work, keep = sys.argv[1:6]
durable_only = '--durable-only' in sys.argv[6:]
files = [a for a in sys.argv[6:] if not a.startswith('--')]
keep = int(keep)
newest, kept = files[0], files[:keep]
folder = os.path.join(work, 'folder')      # where prune runs
model = os.path.join(work, 'model')        # what a power loss leaves
log = os.path.join(work, 'log')


def fail(msg):
    sys.exit('FAIL: ' + msg)


def run(*args, env=None, cwd=None):
    return subprocess.run(args, capture_output=True, text=True, env=env,
                          cwd=cwd)


def expected(name):
    return os.path.join(work, name + '.raw')


for name in kept:
    out = run('qemu-img', 'convert', '-O', 'raw', name, expected(name),
              cwd=chain)
    if out.returncode != 0:
        fail('%s does not restore before the prune: %s' % (name, out.stderr))


def prune(cwd, cut_at=None):
    """prune in cwd, logged and cut at point cut_at if given."""
    env = dict(os.environ)
    if cut_at is not None:
        open(log, 'w').close()
        # An nbdcow built with a sanitizer needs its runtime first.
        env.update(COW_POWER_DIR=os.path.realpath(cwd), COW_POWER_LOG=log,
                   COW_POWER_CUT_AT=str(cut_at),
                   LD_PRELOAD=' '.join(os.environ.get(
                       'COW_SANITIZER_PRELOAD', '').split() + [shim]))
    return run(nbdcow, 'backup', 'prune', '--keep=%d' % keep, newest,
               env=env, cwd=cwd)


def restores(what, cwd):
    for name in kept:
        out = run('qemu-img', 'compare', '-q', '-f', 'qcow2', '-F', 'raw',
                  name, expected(name), cwd=cwd)
        if out.returncode != 0:
            fail('%s: %s does not restore as before: %s' %
                 (what, name, out.stdout + out.stderr))


def chain_length(cwd):
    out = run('qemu-img', 'info', '--backing-chain', newest, cwd=cwd)
    return out.stdout.count('image: ')


def verify(what):
    """The folder a power loss left: the kept backups restore, the
    newest verifies, and prune run again finishes the job."""
    restores(what, model)
    out = run(nbdcow, 'backup', 'verify', newest, cwd=model)
    if out.returncode != 0:
        fail('%s: backup verify: %s' % (what, out.stdout + out.stderr))
    out = prune(model)
    if out.returncode != 0:
        fail('%s: prune run again: %s' % (what, out.stdout + out.stderr))
    restores(what + ', pruned again', model)
    if chain_length(model) != keep:
        fail('%s: pruned again, the chain is %d files long' %
             (what, chain_length(model)))


def fresh_folder():
    if os.path.exists(folder):
        shutil.rmtree(folder)
    shutil.copytree(chain, folder)


started = time.monotonic()
fresh_folder()
out = prune(folder, 0)
if out.returncode != 0:
    fail('prune under the shim: %s' % (out.stdout + out.stderr))
events = powerdir.read_log(log)
kinds = [e.kind for e in events if e.kind != 'synced']
points = len(kinds)
if 'rename' not in kinds:
    fail('no rename logged (the shim not loaded?)')
cuts = 0
for point in range(1, points + 2):
    if durable_only and point <= points and kinds[point - 1] in (
            'write', 'truncate'):
        continue
    fresh_folder()
    out = prune(folder, point)
    events = powerdir.read_log(log)
    for what, lost, writes_lost in powerdir.ways(events):
        what = 'cut at point %d of %d, %s' % (point, points, what)
        powerdir.build(model, chain, folder, events, lost, writes_lost)
        verify(what)
        cuts += 1
print('prune: %d persistence points, %d cuts checked in %.1f s' %
      (points, cuts, time.monotonic() - started))
