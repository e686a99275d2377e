# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Every crash point, enumerated: for each operation that changes a
# kept overlay (a scenario below: a whole nbdkit run doing it, or an
# nbdcow command), counts its persistence points (each pwrite,
# fallocate, ftruncate and sync on the file, tests/power-log.c), then
# cuts the power at each in turn, not at random, and builds what the
# disk holds three ways (tests/powermodel.py: every unsynced write
# lost, every one kept, torn by sector).  After each cut the file must
# open, every sector read as it was when the last flush that returned
# began (before the operation, if none did) or as written since, every
# checkpoint's marks
# name every block changed since it, and nbdcow check find the file
# sound after a clean stop.
#
#   crash-points.py NBDKIT NBDCOW SHIM DIR [--every] [SCENARIO...]
#
# With --every, every point of every scenario three ways; else every
# point, the way turning with the point (the release check runs
# --every).  Prints, for each scenario, its points and the time taken.

import json
import os
import random
import signal
import subprocess
import sys
import time

import nbd

import controlsock
import powermodel

nbdkit, nbdcow, shim, work = sys.argv[1:5]
every = '--every' in sys.argv[5:]
three_ways = '--three-ways' in sys.argv[5:]
chosen = [a for a in sys.argv[5:] if not a.startswith('--')]
MODES = ('lost', 'kept', 'torn')
SECTOR = 512
B = 65536                       # cow-block-size of most scenarios

base = os.path.join(work, 'base')
overlay = os.path.join(work, 'ov')
sock = os.path.join(work, 'sock')
control = os.path.join(work, 'ctl')
errors = os.path.join(work, 'err')
pidfile = os.path.join(work, 'pid')


def fail(msg):
    try:
        with open(errors) as f:
            tail = f.read()[-3000:]
    except OSError:
        tail = ''
    sys.exit('FAIL: %s\n--- nbdkit said:\n%s' % (msg, tail))


servers = []                    # every Server started, to be ended


class Server:
    """nbdkit serving base through the filter, overlay kept, with the
    shim's environment env if any."""

    def __init__(self, block_size, env=None):
        for p in (sock, control, pidfile):
            if os.path.exists(p):
                os.unlink(p)
        # The pidfile says that the socket listens (bind made it).
        self.p = subprocess.Popen(
            [nbdkit, '-f', '-U', sock, '-P', pidfile, '--filter=cow', 'file',
             base,
             'cow-file=' + overlay, 'cow-control=' + control,
             'cow-block-size=%d' % block_size, 'cow-view-separator=@'],
            stderr=open(errors, 'a'), env=env)
        for _ in range(600):
            if os.path.getsize(pidfile) if os.path.exists(pidfile) else \
               self.p.poll() is not None:
                break
            time.sleep(0.02)
        self.h = None
        servers.append(self)

    def handle(self):
        if self.h is None:
            self.h = nbd.NBD()
            self.h.connect_unix(sock)
        return self.h

    def command(self, *fields):
        """A command on the control socket: its answer, or None if the
        server went."""
        return controlsock.command(control, *fields)

    def stop(self):
        """A clean stop; returns whether nbdkit ran to it."""
        if self.h is not None:
            try:
                self.h.shutdown()
            except nbd.Error:
                pass
            self.h = None
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
            fail('nbdkit hung at its stop')
        return self.p.returncode != -signal.SIGKILL

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


def pattern(tag, length):
    stamp = b'<%s>' % tag.encode()
    return (stamp * (length // len(stamp) + 1))[:length]


class Model:
    """What the disk reads: pre before the operation, post after it,
    floor as of the last flush that returned (pre until one did); each
    sector after a crash reads as floor or as post.  snapshots: the
    checkpoints' disks as they were made."""

    def __init__(self, data):
        self.pre = bytes(data)
        self.post = bytearray(data)
        self.floor = bytearray(data)
        self.snapshots = {}

    def write(self, offset, data):
        self.post[offset:offset + len(data)] = data

    def flushed(self):
        self.floor = bytearray(self.post)


# Each scenario: block size, prepare (normal runs making the file as
# the operation finds it; returns the disk's data and the checkpoints'
# snapshots), and act (the operation under the shim, env, on model:
# it notes what returned).


def write(srv, model, offset, data):
    srv.handle().pwrite(data, offset)
    model.write(offset, data)


def zero(srv, model, offset, length):
    srv.handle().zero(length, offset)
    model.write(offset, bytes(length))


def flush(srv, model):
    srv.handle().flush()
    model.flushed()


def read_disk(srv):
    h = srv.handle()
    size = h.get_size()
    return b''.join(h.pread(min(1 << 20, size - at), at)
                    for at in range(0, size, 1 << 20))


def written_blocks(n, block_size):
    """A new file holding blocks 0 to n-1 written, stopped cleanly."""
    srv = Server(block_size)
    for b in range(n):
        srv.handle().pwrite(pattern('pre%d' % b, block_size), b * block_size)
    data = read_disk(srv)
    if not srv.stop():
        fail('prepare: nbdkit did not stop')
    return data, {}


def with_checkpoint(n):
    srv = Server(B)
    for b in range(n):
        srv.handle().pwrite(pattern('pre%d' % b, B), b * B)
    srv.handle().flush()
    data = read_disk(srv)
    if srv.command('create', '', 'c1') != 'ok\n':
        fail('prepare: checkpoint c1 not made')
    srv.stop()
    return data, {'c1': data}


def crashed_log():
    """A file whose log holds records, the crash before their fold: a
    block zeroed out of the top slot, one written in place, one new."""
    written_blocks(3, B)
    srv = Server(B)
    h = srv.handle()
    h.zero(B, 2 * B)
    h.pwrite(pattern('in-place', 4096), B + 8192)
    h.pwrite(pattern('new', B), 5 * B)
    h.flush()
    data = read_disk(srv)
    srv.kill()
    return data, {}


def act_recovery(env, model):
    srv = Server(B, env)
    read_disk(srv)
    srv.stop()


def act_flush_data(env, model):
    srv = Server(B, env)
    write(srv, model, B + 4096, pattern('a', 8192))
    write(srv, model, 3 * B, pattern('b', B))
    flush(srv, model)
    write(srv, model, 0, pattern('c', 4096))
    flush(srv, model)
    srv.stop()


def act_flush_records(env, model):
    srv = Server(B, env)
    write(srv, model, 4 * B, pattern('d', 2 * B))
    write(srv, model, 9 * B + 16384, pattern('e', 4096))
    flush(srv, model)
    # Into a unit the last record checks: confirmed first.
    write(srv, model, 4 * B + 4096, pattern('q', 4096))
    zero(srv, model, 0, B)
    write(srv, model, 11 * B, pattern('f', B))
    flush(srv, model)
    srv.stop()


def act_flush_pages(env, model):
    # More blocks in one flush than a record holds: the pages.
    srv = Server(4096, env)
    write(srv, model, 8 * 4096, pattern('g', 300 * 4096))
    flush(srv, model)
    write(srv, model, 2 * 4096, pattern('h', 4096))
    flush(srv, model)
    srv.stop()


def act_after_checkpoint(env, model):
    # A write in place into a block held before the checkpoint beside
    # one into new space: their record, which clears MARKS_STALE, is
    # kept only if the new data is durable.
    srv = Server(B, env)
    write(srv, model, B, pattern('i', B))
    write(srv, model, 9 * B, pattern('r', B))
    flush(srv, model)
    write(srv, model, 6 * B + 4096, pattern('j', 4096))
    flush(srv, model)
    srv.stop()


def made(env, model, verb, name):
    """A server on the file once it made checkpoint or view name
    (verb), whose snapshot the model takes; None if the cut came
    first."""
    srv = Server(B, env)
    read_disk(srv)
    answer = srv.command(verb, '', name)
    model.snapshots[name] = bytes(model.post)
    if answer is not None:
        return srv
    srv.stop()
    return None


def act_checkpoints(env, model):
    srv = made(env, model, 'create', 'c2')
    if srv is None:
        return
    write(srv, model, 2 * B, pattern('k', B))
    flush(srv, model)
    if srv.command('delete', '', 'c1') is None:
        return srv.stop()
    write(srv, model, 8 * B, pattern('l', B))
    flush(srv, model)
    srv.stop()


def act_checkpoint_marks(env, model):
    # No change in flight: the marks stay exact at every cut.
    srv = Server(B, env)
    for verb, name in (('create', 'c2'), ('delete', 'c1'), ('create', 'c3')):
        answer = srv.command(verb, '', name)
        if verb == 'create':
            model.snapshots[name] = bytes(model.post)
        if answer is None:
            break
    srv.stop()


def act_view(env, model):
    srv = made(env, model, 'view-create', 'v')
    if srv is None:
        return
    write(srv, model, B, pattern('m', B))
    write(srv, model, 2 * B + 4096, pattern('n', 4096))
    flush(srv, model)
    v = nbd.NBD()
    v.set_export_name('@v')
    v.connect_unix(sock)
    v.pread(4 * B, 0)
    v.shutdown()
    # Not flushed: the entry on disk names the unit's old place, which
    # the view's deletion must not punch before a flush.
    write(srv, model, 2 * B + 16384, pattern('p', 4096))
    if srv.command('view-delete', '', 'v') is None:
        return srv.stop()
    # Its places go back in the background: every point of that comes
    # before the next write (a cut ends the server, and the wait).
    while 'giving-back' in (srv.command('view', '') or ''):
        time.sleep(0.01)
    write(srv, model, 3 * B, pattern('o', B))
    flush(srv, model)
    srv.stop()


def act_view_stop(env, model):
    # The view ends as nbdkit stops: the unit written moved out of the
    # place the view kept, which is punched only once a flush makes the
    # map on disk name the new one.
    srv = made(env, model, 'view-create', 'v')
    if srv is None:
        return
    write(srv, model, B + 8192, pattern('s', 4096))
    srv.stop()


def act_repair(env, model):
    subprocess.run([nbdcow, 'check', '--repair', overlay], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


SCENARIOS = {
    'recovery': (B, crashed_log, act_recovery),
    'flush-data': (B, lambda: written_blocks(4, B), act_flush_data),
    'flush-records': (B, lambda: written_blocks(2, B), act_flush_records),
    'flush-pages': (4096, lambda: written_blocks(4, 4096), act_flush_pages),
    'after-checkpoint': (B, lambda: with_checkpoint(4), act_after_checkpoint),
    'checkpoints': (B, lambda: with_checkpoint(4), act_checkpoints),
    'checkpoint-marks': (B, lambda: with_checkpoint(4), act_checkpoint_marks),
    'view': (B, lambda: written_blocks(4, B), act_view),
    'view-stop': (B, lambda: written_blocks(4, B), act_view_stop),
    'repair': (B, crashed_log, act_repair),
}


def run_act(act, model, cut_at):
    """The operation with the shim logging its calls, cut at point
    cut_at (0: none).  Returns the log's path."""
    log = overlay + '.log'
    open(log, 'wb').close()
    env = dict(os.environ,
               COW_POWER_FILE=os.path.realpath(overlay), COW_POWER_LOG=log,
               COW_POWER_CUT_AT=str(cut_at))
    if act is act_repair:
        # An nbdcow built with a sanitizer needs its runtime first.
        env['LD_PRELOAD'] = ' '.join(
            os.environ.get('COW_SANITIZER_PRELOAD', '').split() + [shim])
    else:
        env['NBDKIT_PRELOAD'] = shim
    try:
        act(env, model)
    except nbd.Error:
        pass                    # the server went at the cut
    while servers:
        servers.pop().kill()    # the cut left it, or it ended
    return log


def points_of(log):
    calls, _ = powermodel.read_log(log)
    with open(log, 'rb') as f:
        data = f.read()
    syncs, at = 0, 0
    while at + powermodel.RECORD.size <= len(data):
        kind, _, _, _, length = powermodel.RECORD.unpack_from(data, at)
        at += powermodel.RECORD.size
        if kind == powermodel.PWRITE:
            at += length
        syncs += kind == powermodel.SYNC_START
    return len(calls) + syncs


def changed_since(name):
    out = subprocess.run([nbdcow, 'map', '--json', '--since=' + name,
                          overlay], capture_output=True, text=True)
    if out.returncode != 0:
        fail('map --since=%s: %s' % (name, out.stdout + out.stderr))
    return [(r['offset'], r['length']) for r in json.loads(out.stdout)
            if r['state'] != 'base']


def info_of():
    return json.loads(subprocess.run([nbdcow, 'info', '--json', overlay],
                                     capture_output=True, text=True).stdout)


def verify(what, model, block_size, exact):
    """The file after the cut: opens, reads as the model allows, marks
    every change since each checkpoint (exactly, if exact), and checks
    sound."""
    if exact and not info_of()['marks_exact']:
        # Before nbdkit opens it, which marks every block held.
        fail('%s: the marks are left not exact' % what)
    srv = Server(block_size)
    if srv.p.poll() is not None:
        fail('%s: nbdkit refused the file' % what)
    try:
        data = read_disk(srv)
    except nbd.Error as e:
        fail('%s: reading the disk: %s' % (what, e))
    srv.stop()
    for s in range(len(data) // SECTOR):
        at = s * SECTOR
        got = data[at:at + SECTOR]
        if got in (model.post[at:at + SECTOR], model.floor[at:at + SECTOR]):
            continue
        if got == model.pre[at:at + SECTOR]:
            fail('%s: sector %d lost a flushed write' % (what, s))
        fail('%s: sector %d reads what no one wrote: %r' % (what, s, got[:24]))
    out = subprocess.run([nbdcow, 'check', overlay], capture_output=True,
                         text=True)
    if out.returncode != 0:
        fail('%s: nbdcow check: %s' % (what, out.stdout + out.stderr))
    for cp in info_of().get('checkpoints') or []:
        name = cp['name'] if isinstance(cp, dict) else cp
        snap = model.snapshots.get(name)
        if snap is None:
            fail('%s: checkpoint %s, never made, is in the file' % (what, name))
        marked = changed_since(name)
        for at in range(0, len(data), SECTOR):
            if data[at:at + SECTOR] == snap[at:at + SECTOR]:
                continue
            if not any(o <= at < o + n for o, n in marked):
                fail('%s: sector %d changed since checkpoint %s, unmarked' %
                     (what, at // SECTOR, name))


def ways(point, calls, synced):
    """How the unsynced calls of a cut at point reach the disk: lost,
    kept or torn, and all kept but one, for each one in turn: every
    way, or plainly one of the first three, turning with the point, and
    each of the three writes before the last lost alone (what a
    reordering disk leaves: a later write without an earlier one);
    with --three-ways the first three only."""
    later = [] if three_ways else powermodel.unsynced(calls, synced)
    if every:
        return ([(mode, None) for mode in MODES] +
                [('one-lost', seq) for seq in later])
    return ([(MODES[point % 3], None)] +
            [('one-lost', seq) for seq in later[-4:-1]])


def sweep(name):
    block_size, prepare, act = SCENARIOS[name]
    for p in (overlay, errors):
        if os.path.exists(p):
            os.unlink(p)
    data, snapshots = prepare()
    pre_file = overlay + '.pre'
    powermodel.copy_image(overlay, pre_file)
    started = time.monotonic()
    points = points_of(run_act(act, Model(data), 0))
    if points == 0:
        fail('%s: no persistence point logged (the shim not loaded?)' % name)
    rng = random.Random(len(name))
    cuts = 0
    for point in range(1, points + 2):
        powermodel.copy_image(pre_file, overlay)
        model = Model(data)
        model.snapshots = dict(snapshots)
        log = run_act(act, model, point)
        calls, synced = powermodel.read_log(log)
        for mode, missing in ways(point, calls, synced):
            powermodel.lose_power_in(overlay, pre_file, calls, synced, rng,
                                     mode, missing)
            how = mode if missing is None else 'kept but call %d' % missing
            verify('%s, cut at point %d of %d, unsynced writes %s' %
                   (name, point, points, how), model, block_size,
                   act is act_checkpoint_marks)
            cuts += 1
    print('%s: %d persistence points, %d cuts checked in %.1f s' %
          (name, points, cuts, time.monotonic() - started), flush=True)


size = 32 * B
with open(base, 'wb') as f:
    f.write(os.urandom(size))
for name in chosen or SCENARIOS:
    sweep(name)
