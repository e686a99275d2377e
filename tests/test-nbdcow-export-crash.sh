#!/usr/bin/env bash
# kill -9 of nbdcow export at random moments leaves the overlay as it
# was, and OUT either absent, or not a qcow2 file (its header is written
# last), or complete: never a qcow2 file that reads otherwise than the
# live view.  Running the export again makes the whole file.
. "$abs_top_srcdir/tests/functions.sh"
. "$tests/nbdcow_setup.sh"

cp "$ov" "$tmp/ov.orig"
default_rounds=$(rounds 30 10)
"$PYTHON" - <<PY || fail "a kill left a qcow2 file that reads otherwise"
import json, os, random, signal, subprocess, time

tmp, nbdcow, ov = '$tmp', '$NBDCOW', '$ov'
out = tmp + '/o.qcow2'
seed = int('${EXPORT_CRASH_SEED:-$RANDOM}')
rounds = int('${EXPORT_CRASH_ROUNDS:-$default_rounds}')
rng = random.Random(seed)
print('EXPORT_CRASH_SEED=%d EXPORT_CRASH_ROUNDS=%d' % (seed, rounds))

def export():
    return subprocess.Popen([nbdcow, 'export', ov, '--base=' + tmp + '/base',
                             out], stdout=subprocess.DEVNULL)

def reads_as_live():
    subprocess.check_call(['qemu-img', 'check', '-q', out])
    return subprocess.call(['qemu-img', 'compare', '-q', '-f', 'qcow2',
                            '-F', 'raw', out, tmp + '/live.img']) == 0

start = time.monotonic()
export().wait()
whole = time.monotonic() - start
print('a whole export takes %.3f s' % whole)

outcomes = {}
for r in range(rounds):
    if os.path.exists(out):
        os.unlink(out)
    p = export()
    time.sleep(rng.uniform(0, whole * 1.2))
    p.send_signal(signal.SIGKILL)
    p.wait()
    if not os.path.exists(out):
        outcome = 'no file'
    else:
        info = json.loads(subprocess.check_output(
            ['qemu-img', 'info', '--output=json', out]))
        outcome = 'not qcow2' if info['format'] != 'qcow2' else 'complete'
        assert outcome != 'complete' or reads_as_live(), \
            'round %d: a qcow2 file that reads otherwise' % r
    outcomes[outcome] = outcomes.get(outcome, 0) + 1
    assert open(ov, 'rb').read() == open(tmp + '/ov.orig', 'rb').read(), \
        'round %d: the overlay changed' % r
    subprocess.check_call([nbdcow, 'export', ov, '--base=' + tmp + '/base',
                           out], stdout=subprocess.DEVNULL)
    assert reads_as_live(), 'round %d: the export run again' % r
print('killed:', outcomes)
PY
