#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# kill -9 of nbdcow commit --empty at random moments never leaves base
# and overlay reading differently from before the commit (or after it:
# the same disk), and running the commit again finishes it.
. "$abs_top_srcdir/tests/functions.sh"
. "$tests/nbdcow-setup.sh"

cp "$ov" "$tmp/ov.orig"
# Each round starts nbdkit twice.
default_rounds=$(rounds 60 15)
"$PYTHON" - <<PY || fail "a kill left base and overlay reading otherwise"
import json, random, signal, subprocess, time, shutil

tmp, nbdcow, ov = '$tmp', '$NBDCOW', '$ov'
live = open(tmp + '/live.img', 'rb').read()
base = open(tmp + '/base', 'rb').read()
seed = int('${COMMIT_CRASH_SEED:-$RANDOM}')
rounds = int('${COMMIT_CRASH_ROUNDS:-$default_rounds}')
rng = random.Random(seed)
print('COMMIT_CRASH_SEED=%d COMMIT_CRASH_ROUNDS=%d' % (seed, rounds))

def fresh():
    shutil.copyfile(tmp + '/ov.orig', ov)
    shutil.copyfile(tmp + '/base', tmp + '/target')

def commit():
    return subprocess.Popen([nbdcow, 'commit', '--empty', ov, tmp + '/target'],
                            stdout=subprocess.DEVNULL)

def view():
    subprocess.check_call(['$NBDKIT', '-U', '-', '--filter=cow', 'file',
                           tmp + '/target', 'cow-file=' + ov, '--run',
                           'nbdcopy "\$uri" ' + tmp + '/view.img'])
    return open(tmp + '/view.img', 'rb').read()

fresh()
start = time.monotonic()
commit().wait()
whole = time.monotonic() - start
print('a whole commit --empty takes %.3f s' % whole)

phases = {}
for r in range(rounds):
    fresh()
    p = commit()
    time.sleep(rng.uniform(0, whole * 1.2))
    p.send_signal(signal.SIGKILL)
    p.wait()
    target = open(tmp + '/target', 'rb').read()
    info = json.loads(subprocess.check_output([nbdcow, 'info', '--json', ov]))
    phase = ('not started' if target == base else
             'writing' if target != live else
             'written' if info['blocks']['overlay'] and info['closed_cleanly'] else
             'emptying' if not info['closed_cleanly'] else 'done')
    phases[phase] = phases.get(phase, 0) + 1
    assert view() == live, 'round %d, killed while %s' % (r, phase)
    subprocess.check_call([nbdcow, 'commit', '--empty', ov, tmp + '/target'],
                          stdout=subprocess.DEVNULL)
    assert open(tmp + '/target', 'rb').read() == live, 'round %d: rerun' % r
    assert view() == live, 'round %d: after the rerun' % r
print('killed while:', phases)
assert len(phases) >= 2, 'the kills all fell in one phase'
PY
