#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# kill -9 of nbdcow export at random moments leaves the overlay as it
# was and never a qcow2 file that reads otherwise than the live view.
# Rounds of three kinds:
#  - no OUT before: OUT is absent or complete (nbdcow writes a nameless
#    O_TMPFILE file and names it OUT once complete);
#  - an earlier OUT: OUT is that file, byte for byte, or complete (the
#    complete file is renamed over it);
#  - a filesystem without O_TMPFILE (tests/no-tmpfile.c): OUT is absent,
#    not a qcow2 file (its header is written last), or complete.
# Nothing else is left in OUT's directory but, in a kill between the
# two steps of a replacement, OUT.nbdcow-PID, complete.  Running the
# export again makes the whole file, in each kind.
. "$abs_top_srcdir/tests/functions.sh"
. "$tests/nbdcow-setup.sh"

cp "$ov" "$tmp/ov.orig"
mkdir "$tmp/out"
head -c 1000000 /dev/urandom > "$tmp/earlier"
shim=$abs_top_builddir/tests/.libs/no-tmpfile.so
default_rounds=$(rounds 30 12)
"$PYTHON" - <<PY || fail "a kill left a file that reads otherwise"
import json, os, random, signal, subprocess, time

tmp, nbdcow, ov = '$tmp', '$NBDCOW', '$ov'
out = tmp + '/out/o.qcow2'
earlier = open(tmp + '/earlier', 'rb').read()
no_tmpfile = dict(os.environ, LD_PRELOAD=' '.join(
    x for x in ['${sanitizer_preload:-}', '$shim'] if x))
seed = int('${EXPORT_CRASH_SEED:-$RANDOM}')
rounds = int('${EXPORT_CRASH_ROUNDS:-$default_rounds}')
rng = random.Random(seed)
print('EXPORT_CRASH_SEED=%d EXPORT_CRASH_ROUNDS=%d' % (seed, rounds))

def export(env=None):
    return subprocess.Popen([nbdcow, 'export', ov, '--base=' + tmp + '/base',
                             out], stdout=subprocess.DEVNULL, env=env)

def reads_as_live(f):
    subprocess.check_call(['qemu-img', 'check', '-q', f])
    return subprocess.call(['qemu-img', 'compare', '-q', '-f', 'qcow2',
                            '-F', 'raw', f, tmp + '/live.img']) == 0

def is_qcow2(f):
    info = json.loads(subprocess.check_output(
        ['qemu-img', 'info', '--output=json', f]))
    return info['format'] == 'qcow2'

def outcome_of(r):
    """What the kill left as OUT, checking what the kind allows."""
    if not os.path.exists(out):
        return 'no file'
    if open(out, 'rb').read() == earlier:
        return 'the earlier file'
    if not is_qcow2(out):
        return 'not qcow2'
    assert reads_as_live(out), 'round %d: a qcow2 file that reads otherwise' % r
    return 'complete'

def strays(r):
    """Removes what else is in OUT's directory, checking it."""
    for name in os.listdir(tmp + '/out'):
        f = tmp + '/out/' + name
        if f == out:
            continue
        assert name.startswith('o.qcow2.nbdcow-') and reads_as_live(f), \
            'round %d: left %s' % (r, name)
        os.unlink(f)

start = time.monotonic()
export().wait()
whole = time.monotonic() - start
print('a whole export takes %.3f s' % whole)

allowed = {'new': {'no file', 'complete'},
           'earlier': {'the earlier file', 'complete'},
           'no O_TMPFILE': {'no file', 'not qcow2', 'complete'}}
outcomes = {}
for r in range(rounds):
    kind = list(allowed)[r % 3]
    if os.path.exists(out):
        os.unlink(out)
    if kind == 'earlier':
        open(out, 'wb').write(earlier)
    env = no_tmpfile if kind == 'no O_TMPFILE' else None
    p = export(env)
    time.sleep(rng.uniform(0, whole * 1.2))
    p.send_signal(signal.SIGKILL)
    p.wait()
    outcome = outcome_of(r)
    assert outcome in allowed[kind], 'round %d (%s): %s' % (r, kind, outcome)
    strays(r)
    outcomes[kind, outcome] = outcomes.get((kind, outcome), 0) + 1
    assert open(ov, 'rb').read() == open(tmp + '/ov.orig', 'rb').read(), \
        'round %d: the overlay changed' % r
    subprocess.check_call([nbdcow, 'export', ov, '--base=' + tmp + '/base',
                           out], stdout=subprocess.DEVNULL, env=env)
    assert reads_as_live(out), 'round %d (%s): the export run again' % (r, kind)
    strays(r)
print('killed:', outcomes)
PY
