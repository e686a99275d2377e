# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Crash test of cow-file (tests/test-kept-crash.sh): rounds of random
# writes, zeroes and flushes with many requests in flight, some with
# FUA (durable on completion, with every write completed before), ended by
# kill -9 at a random moment; after each restart every unit must read
# as its last flushed value or as one written after it, never older,
# never anything else.  Each round begins with a checkpoint (made
# through cow-control, which flushes it into the file), and after each
# restart the changes view since every checkpoint still listed reports
# as changed every unit that reads otherwise than at the checkpoint:
# the marks in the file never miss a change the file holds.
#
# With POWER_SHIM (tests/power-log.c, tests/test-kept-power.sh) the
# crash is a power loss: after the kill, the overlay is replaced by
# what a disk may hold then, built from the shim's log of the calls
# nbdkit made on it (power_image), and the same must hold.
#
# $KEPT_CRASH_PARAMS adds parameters to nbdkit's (the background fill,
# whose copy-ups must never undo a write nor invent data).
#
# $KEPT_CRASH_DATA_ONLY=1: every block is written whole into the
# overlay first, then the rounds only write into blocks it holds, with
# no zeroes and no checkpoints, so that no flush changes a state: each
# flush makes data alone durable, which a power cut must not lose.
#
# $KEPT_CRASH_FRESH=1: no zeroes, and most writes into blocks never
# written, flushed often, so that most flushes take new space and (of
# a file of format version 7 on) write a record of the log in the one
# sync of its data (from version 8 on with the marks of its blocks,
# since the checkpoint each round begins with), the others often into
# those units again, which the last record checks; with POWER_SHIM the power is cut at one sync in
# $KEPT_CRASH_CUT (50 by default), inside which a crash may leave the
# record durable and its data not.
#
# $KEPT_CRASH_VIEWS=1: point-in-time views (cow-view-separator=@) are
# made, read and deleted at random moments among the requests, so that
# writes move what a view keeps to the blocks' other places and the
# places only a view kept are given back, with crashes in between.
# Every unit a view reads holds a value written there; a view's
# checkpoint, which a crash may leave, is deleted after the restart.
#
# usage: kept-crash.py NBDKIT BASE OVERLAY SOCKET ROUNDS SEED [POWER_SHIM]

import os
import random
import signal
import subprocess
import sys
import time

import nbd

import controlsock
import powermodel

nbdkit, base, overlay, sock, rounds, seed = sys.argv[1:7]
rounds, seed = int(rounds), int(seed)
power_shim = sys.argv[7] if len(sys.argv) > 7 else None
rng = random.Random(seed)
UNIT = 4096
size = os.path.getsize(base)
units = size // UNIT
IN_FLIGHT = 16
BLOCK_UNITS = 65536 // UNIT     # units in a block (cow-block-size=64K)

control = overlay + '.ctl'
data_only = os.environ.get('KEPT_CRASH_DATA_ONLY') == '1'
fresh_only = os.environ.get('KEPT_CRASH_FRESH') == '1'
if fresh_only:
    IN_FLIGHT = 2               # a write seldom far from the flush before
views = os.environ.get('KEPT_CRASH_VIEWS') == '1'
with open(base, 'rb') as f:
    base_data = f.read()
# values[u]: what unit u has held, in write order; durable[u]: index
# of the oldest value a crash may bring back.
values = [[base_data[u * UNIT:(u + 1) * UNIT]] for u in range(units)]
durable = [0] * units


def start(logged=False):
    if os.path.exists(sock):
        os.unlink(sock)
    env = dict(os.environ)
    if logged:
        powermodel.copy_image(overlay, overlay + '.start')
        open(overlay + '.log', 'wb').close()
        env.update(NBDKIT_PRELOAD=power_shim,
                   COW_POWER_FILE=os.path.realpath(overlay),
                   COW_POWER_LOG=overlay + '.log',
                   COW_POWER_CUT=os.environ.get('KEPT_CRASH_CUT', '50'),
                   COW_POWER_SEED=str(rng.randrange(1 << 30)))
    if os.path.exists(control):
        os.unlink(control)
    p = subprocess.Popen([nbdkit, '-f', '-U', sock, '--filter=cow', 'file',
                          base, 'cow-file=' + overlay,
                          'cow-control=' + control,
                          'cow-changes-separator=+'] +
                         (['cow-view-separator=@'] if views else []) +
                         os.environ.get('KEPT_CRASH_PARAMS', '').split(),
                         stderr=open(overlay + '.err', 'a'), env=env)
    # 30 seconds, as tests/functions.sh gives: under a sanitizer runtime
    # beside other tests, starting takes seconds.
    for _ in range(600):
        if os.path.exists(sock):
            return p
        if p.poll() is not None:
            break
        time.sleep(0.05)
    # The shim cut the power at a sync of the start, before the socket
    # was made (an overlay made before starts in .get_ready): the
    # caller's connect fails, as for a cut just after.
    if logged and p.returncode == -signal.SIGKILL:
        return p
    with open(overlay + '.err') as f:
        sys.exit('nbdkit did not start:\n' + f.read()[-2000:])


def fail(msg):
    sys.exit('FAIL: ' + msg)


def connect(p):
    """A handle connected to p, the nbdkit of start().  nbdkit creates
    its socket before it listens, so a refused connection is tried
    again while it runs.  If it has exited, says how, with the end of
    what it printed, and raises nbd.Error."""
    for _ in range(100):
        h = nbd.NBD()
        try:
            h.connect_unix(sock)
            return h
        except nbd.Error:
            if p.poll() is not None:
                if p.returncode != -signal.SIGKILL:
                    with open(overlay + '.err', errors='replace') as f:
                        print('nbdkit exited with status %d:\n%s' %
                              (p.returncode, ''.join(f.readlines()[-10:])),
                              file=sys.stderr)
                raise
            time.sleep(0.05)
    fail('nbdkit refused connections for 5 s')


def verify(h):
    chunk = 256
    for u in range(units):
        if u % chunk == 0:
            data = h.pread(min(chunk, units - u) * UNIT, u * UNIT)
        got = bytes(data[u % chunk * UNIT:(u % chunk + 1) * UNIT])
        allowed = values[u][durable[u]:]
        if got not in allowed:
            old = got in values[u]
            fail('unit %d after round %d reads %s' %
                 (u, r, 'a value older than the last flush' if old
                  else 'data never written there'))
        values[u] = [got]
        durable[u] = 0


def command(*fields):
    """A command on the control socket: its answer, or None if the
    server went (a power cut at the checkpoint's flush)."""
    return controlsock.command(control, *fields)


def changed_units(name):
    """The units the changes view since checkpoint name reports as
    changed (data or zero, not a hole that is not zero)."""
    v = nbd.NBD()
    v.set_export_name('+' + name)
    v.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
    v.connect_unix(sock)
    found = set()
    at = 0

    def extents(meta, offset, entries, err):
        nonlocal at
        for i in range(0, len(entries), 2):
            length, flags = entries[i], entries[i + 1]
            if flags != 1:          # not a hole without the zero flag
                found.update(range(at // UNIT, (at + length) // UNIT))
            at += length
        return 0
    while at < size:
        v.block_status(size - at, at, extents)
    v.shutdown()
    return found


# at_checkpoint[name]: what each unit read when checkpoint name was made.
at_checkpoint = {}


class ServerGone(Exception):
    """The control socket found no server (a power cut)."""


def check_checkpoints():
    """Every checkpoint listed reports every unit changed since it."""
    answer = command('list', '')
    if answer is None:
        raise ServerGone()
    if not answer.startswith('ok\n'):
        fail('list of checkpoints after round %d: %r' % (r, answer))
    for name in answer.split('\n')[1:-1]:
        if name.startswith('v'):
            # A view's, left by the crash: a checkpoint of no instant
            # the model knows.
            if command('delete', '', name) is None:
                raise ServerGone()
            continue
        if name not in at_checkpoint:
            fail('checkpoint %s came back after round %d' % (name, r))
        reported = changed_units(name)
        for u in range(units):
            if values[u][0] != at_checkpoint[name][u] and u not in reported:
                fail('unit %d changed since checkpoint %s, unreported '
                     'after round %d' % (u, name, r))


def make_checkpoint(name):
    """Checkpoint name, after the units verified; the one made three
    rounds before deleted.  A power cut may take either command."""
    at_checkpoint[name] = [values[u][0] for u in range(units)]
    answer = command('create', '', name)
    if answer not in ('ok\n', None):
        fail('checkpoint %s not made: %r' % (name, answer))
    old = 'r%d' % (r - 3)
    if old in at_checkpoint and command('delete', '', old) == 'ok\n':
        del at_checkpoint[old]


view_made = None                # the live view's name
view_deleted = None             # the view deleted since, its checkpoint kept
view_counts = {'made': 0, 'read': 0, 'deleted': 0}


def view_step():
    """With views, now and then: makes a view, reads a random MiB of it
    (each unit a value written there), or deletes it.  A power cut may
    take any command: ServerGone."""
    global view_made, view_deleted
    if not views or rng.random() > 0.02:
        return
    if view_made is None:
        # The checkpoint of the view deleted before goes now, not with
        # it: its flush would make the view's deletion durable at once.
        if view_deleted and command('delete', '', view_deleted) is None:
            raise ServerGone()
        view_deleted = None
        view_made = 'v%d' % seq
        answer = command('view-create', '', view_made)
        if answer is None:
            raise ServerGone()
        if not answer.startswith('ok\n'):
            fail('view %s not made: %r' % (view_made, answer))
        view_counts['made'] += 1
        return
    if rng.random() < 0.5:
        v = nbd.NBD()
        v.set_export_name('@' + view_made)
        v.connect_unix(sock)
        first = rng.randrange(units - 256)
        data = v.pread(256 * UNIT, first * UNIT)
        v.shutdown()
        for u in range(first, first + 256):
            if data[(u - first) * UNIT:(u - first + 1) * UNIT] not in values[u]:
                fail('unit %d of view %s reads data never written there' %
                     (u, view_made))
        view_counts['read'] += 1
        return
    if command('view-delete', '', view_made) is None:
        raise ServerGone()
    view_counts['deleted'] += 1
    view_made, view_deleted = None, view_made


def value(u, seq):
    stamp = b'%08d:%08d:' % (u, seq)
    return (stamp * (UNIT // len(stamp) + 1))[:UNIT]


def power_image():
    """The overlay replaced by what it may hold after a power loss now
    (tests/powermodel.py): from the file as this run began and the
    shim's log of the calls on it."""
    calls, synced = powermodel.read_log(overlay + '.log')
    powermodel.lose_power_in(overlay, overlay + '.start', calls, synced, rng)


# Blocks never written, in a random order: some writes go to one of
# them, so that copy-ups of base data (the state change a crash could
# get wrong) keep happening round after round.
fresh = list(range(units // BLOCK_UNITS))
rng.shuffle(fresh)
recent = []                     # units of fresh blocks, as first written

seq = 0
if power_shim and not os.path.exists(overlay):
    # The file's creation is not what this tests: make it first.  The
    # filter lays a new file out when the first client connects (the
    # base's size is known then).
    p = start()
    h = connect(p)
    if data_only:
        for b in range(units // BLOCK_UNITS):
            us = range(b * BLOCK_UNITS, (b + 1) * BLOCK_UNITS)
            for u in us:
                values[u] = [value(u, 0)]
            h.pwrite(b''.join(values[u][0] for u in us), b * BLOCK_UNITS * UNIT)
        h.flush()
    h.shutdown()
    p.terminate()
    p.wait()
for r in range(rounds):
    p = start(logged=power_shim is not None)
    try:
        h = connect(p)
    except nbd.Error:
        # The shim may cut the power at a sync of nbdkit's start too
        # (starting the overlay marks it in use): a crash like any other.
        if power_shim is None or p.wait(timeout=10) != -signal.SIGKILL:
            raise
        power_image()
        continue
    # A power cut may come while the units are checked too: the fill
    # (KEPT_CRASH_PARAMS) syncs the overlay on its own.
    try:
        verify(h)
        check_checkpoints()
        if not data_only:
            make_checkpoint('r%d' % r)
    except (nbd.Error, ServerGone):
        if power_shim is None or p.wait(timeout=10) != -signal.SIGKILL:
            raise
        power_image()
        continue
    busy = set()                   # units with a write in flight
    completed = [0] * units        # index of the last completed value
    for u in range(units):
        completed[u] = len(values[u]) - 1
    deadline = time.time() + rng.uniform(0.05, 0.6)

    def write_done(us, fua):
        """Completion of a write that added a value to each unit of us.
        With fua it is durable once complete, as is every write
        completed before it began (the man page's promise)."""
        indexes = [len(values[u]) - 1 for u in us]
        snapshot = {u: completed[u] for u in range(units)} if fua else {}

        def cb(err):
            for u, index in zip(us, indexes):
                busy.discard(u)
                if err.value == 0:
                    completed[u] = max(completed[u], index)
            if err.value == 0 and fua:
                for u, i in snapshot.items():
                    durable[u] = max(durable[u], i)
                for u, index in zip(us, indexes):
                    durable[u] = max(durable[u], index)
            return 1
        return cb

    def flush_done(snapshot):
        def cb(err):
            if err.value == 0:
                for u, i in snapshot.items():
                    durable[u] = max(durable[u], i)
            return 1
        return cb

    # With POWER_SHIM the shim may cut the power itself, at a sync
    # (COW_POWER_CUT): the connection then fails.  Nothing else may.
    view_made = view_deleted = None
    try:
        while time.time() < deadline:
            view_step()
            while h.aio_in_flight() < IN_FLIGHT:
                if rng.random() < (0.3 if fresh_only else 0.05):
                    snapshot = {u: completed[u] for u in range(units)}
                    h.aio_flush(completion=flush_done(snapshot))
                    continue
                if not data_only and not fresh_only and rng.random() < 0.02:
                    # A whole block zeroed, so that blocks keep changing
                    # state (and the state area keeps being written).
                    first = rng.randrange(units // BLOCK_UNITS) * BLOCK_UNITS
                    us = range(first, first + BLOCK_UNITS)
                    if busy.intersection(us):
                        break
                else:
                    us = [rng.randrange(units)]
                    if fresh and not data_only and \
                       rng.random() < (0.6 if fresh_only else 0.02):
                        us = [fresh.pop() * BLOCK_UNITS +
                              rng.randrange(BLOCK_UNITS)]
                        recent.append(us[0])
                    elif fresh_only and recent and rng.random() < 0.5:
                        # Again into a unit a recent flush first wrote.
                        us = [rng.choice(recent[-2:])]
                    if us[0] in busy:
                        break
                busy.update(us)
                seq += 1
                fua = rng.random() < 0.05
                flags = nbd.CMD_FLAG_FUA if fua else 0
                if len(us) > 1 or (not data_only and not fresh_only and
                                   rng.random() < 0.1):
                    for u in us:
                        values[u].append(bytes(UNIT))
                    h.aio_zero(len(us) * UNIT, us[0] * UNIT,
                               completion=write_done(us, fua), flags=flags)
                else:
                    values[us[0]].append(value(us[0], seq))
                    h.aio_pwrite(values[us[0]][-1], us[0] * UNIT,
                                 completion=write_done(us, fua), flags=flags)
            h.poll(-1)
    except (nbd.Error, ServerGone):
        if power_shim is None or p.wait(timeout=10) != -signal.SIGKILL:
            raise
    # Requests are still in flight: the crash comes now.
    p.send_signal(signal.SIGKILL)
    p.wait()
    if power_shim:
        power_image()
    try:
        h.close()
    except Exception:
        pass
    del h

p = start()
h = connect(p)
r = rounds
verify(h)
check_checkpoints()
h.shutdown()
p.terminate()
p.wait()
print('kept-crash: %d %s, %d writes%s, nothing flushed lost, no change '
      'unmarked' % (rounds, 'power losses' if power_shim else 'kills', seq,
                    ', views %(made)d made, %(read)d read, %(deleted)d '
                    'deleted' % view_counts if views else ''))
