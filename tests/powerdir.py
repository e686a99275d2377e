# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# What a folder may hold after a power loss, from the log
# tests/power-dir.c keeps of what a process changed in it: a change of
# its names (a link, rename or unlink) is on disk once a sync of the
# folder that started after it returned has succeeded, a write to a
# file once a sync of that file has; of the others, any may be lost,
# each on its own, as a filesystem that orders nothing may leave.  The
# files the process made are read from the folder it left (which holds
# all it wrote), the others from a copy of the folder made before it
# ran.  Used by tests/prune-power.py.

import os
import shutil


class Event:
    def __init__(self, line):
        fields = line.split()
        self.seq, self.kind, self.args = int(fields[0]), fields[1], fields[2:]


NAME_CHANGES = ('link', 'rename', 'unlink')


def read_log(path):
    with open(path) as f:
        return [Event(line) for line in f if line.endswith('\n')]


def durable(events):
    """The seqs of the changes a sync that succeeded covers."""
    succeeded = {int(e.args[0]) for e in events if e.kind == 'synced'}
    covered = set()
    for s in events:
        if s.kind != 'sync' or s.seq not in succeeded:
            continue
        ino = s.args[0]
        for e in events:
            if e.seq >= s.seq:
                break
            if (ino == '0' and e.kind in NAME_CHANGES or
                    e.kind in ('write', 'truncate') and e.args[0] == ino):
                covered.add(e.seq)
    return covered


def unsynced_names(events):
    """The seqs of the name changes a power loss may undo."""
    kept = durable(events)
    return [e.seq for e in events
            if e.kind in NAME_CHANGES and e.seq not in kept]


def ways(events):
    """How a power loss may leave the folder, as (what, the seqs of
    name changes lost, whether unsynced writes are lost): all lost, all
    kept, the names kept but not the bytes, and every name change kept
    but one, for each in turn."""
    lost = unsynced_names(events)
    yield 'all lost', set(lost), True
    yield 'all kept', set(), False
    yield 'names kept, unsynced writes lost', set(), True
    for seq in lost:
        yield 'all kept but name change %d' % seq, {seq}, False


def names_after(before, events, lost):
    """Each name of the folder and where its file comes from: ('before',
    name) or ('made', inode)."""
    names = {n: ('before', n) for n in os.listdir(before)}
    for e in events:
        if e.kind not in NAME_CHANGES or e.seq in lost:
            continue
        if e.kind == 'link':
            names[e.args[1]] = ('made', int(e.args[0]))
        elif e.kind == 'rename' and e.args[0] in names:
            names[e.args[1]] = names.pop(e.args[0])
        elif e.kind == 'unlink':
            names.pop(e.args[0], None)
    return names


def build(out, before, after, events, lost, writes_lost):
    """Makes folder out what a power loss may leave: before, the folder
    before the process ran; after, as it left it; lost and writes_lost
    as ways gives them."""
    kept = durable(events)
    inodes = {os.stat(os.path.join(after, n)).st_ino: n
              for n in os.listdir(after)}
    if os.path.exists(out):
        shutil.rmtree(out)
    os.mkdir(out)
    for name, (whence, key) in names_after(before, events, lost).items():
        if whence == 'before':
            shutil.copy2(os.path.join(before, key), os.path.join(out, name))
            continue
        if key not in inodes:
            raise RuntimeError('file %d, named %s, is gone from %s: the '
                               'model cannot tell its bytes' %
                               (key, name, after))
        path = os.path.join(out, name)
        shutil.copy2(os.path.join(after, inodes[key]), path)
        if not writes_lost:
            continue
        with open(path, 'r+b') as f:
            for e in events:
                if (e.kind == 'write' and int(e.args[0]) == key and
                        e.seq not in kept):
                    f.seek(int(e.args[1]))
                    f.write(bytes(int(e.args[2])))
