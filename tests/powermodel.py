# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# What a file may hold after a power loss, from the log
# tests/power-log.c keeps of the calls a process made on it: the calls
# a successful sync covered (those returned before it started) are on
# disk; of the later ones, each 4K page holds the effect of a random
# number of them, in order, as page writeback may have left it.  Sizes
# change at once.  The filter sets a file's size at open and at a
# clean stop, and extends a packed file ahead of its slots as it runs;
# the entries that name a slot reach the disk only after the data sync
# that covers the size, so a length lost with the power would leave no
# entry pointing past the end.  Used by tests/kept-crash.py and
# tests/crash-points.py, checked by tests/test-power-model.sh.

import os
import struct

# The records of tests/power-log.c.
RECORD = struct.Struct('=IIQQQ')
PWRITE, FALLOCATE, FTRUNCATE, RETURNED, SYNC_START, SYNC_DONE = range(1, 7)
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE = 1, 2, 16
PAGE = 4096


class Call:
    def __init__(self, kind, mode, seq, offset, length, data):
        self.kind, self.mode, self.seq = kind, mode, seq
        self.offset, self.length, self.data = offset, length, data
        self.returned = None            # index of its RETURNED record

    def pages(self):
        return range(self.offset // PAGE,
                     (self.offset + self.length + PAGE - 1) // PAGE)

    def apply(self, img, lo=0, hi=None):
        """Its effect on img within the bytes [lo, hi)."""
        lo = max(lo, self.offset)
        hi = self.offset + self.length if hi is None else \
            min(hi, self.offset + self.length)
        if self.kind == FTRUNCATE:
            del img[self.length:]
            img.extend(bytes(self.length - len(img)))
            return
        if self.kind == FALLOCATE and self.mode & FALLOC_FL_KEEP_SIZE:
            hi = min(hi, len(img))
        if hi <= lo:
            return
        if len(img) < hi:
            img.extend(bytes(hi - len(img)))
        if self.kind == PWRITE:
            img[lo:hi] = self.data[lo - self.offset:hi - self.offset]
        elif self.mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE):
            img[lo:hi] = bytes(hi - lo)


def read_log(path):
    """The calls logged, in the order they started, and the index of
    the SYNC_START record of the latest-started sync that succeeded (-1
    if none).  Syncs overlap (a header's beside a flush's): one that
    began earlier but ended later makes no less durable than the other.
    A record cut short by the kill is dropped.
    """
    with open(path, 'rb') as f:
        log = f.read()
    calls, sync_at, synced, at, index = {}, {}, -1, 0, 0
    while at + RECORD.size <= len(log):
        kind, mode, seq, offset, length = RECORD.unpack_from(log, at)
        at += RECORD.size
        data = None
        if kind == PWRITE:
            if at + length > len(log):
                break
            data, at = log[at:at + length], at + length
        if kind in (PWRITE, FALLOCATE, FTRUNCATE):
            calls[seq] = Call(kind, mode, seq, offset, length, data)
        elif kind == RETURNED:
            calls[seq].returned = index
        elif kind == SYNC_START:
            sync_at[seq] = index
        elif kind == SYNC_DONE:
            synced = max(synced, sync_at[seq])
        index += 1
    return [calls[s] for s in sorted(calls)], synced


SECTOR = 512


def unsynced(calls, synced):
    """The seqs of the calls a power loss may undo: those no sync that
    began after they returned made durable."""
    return [c.seq for c in calls if c.kind != FTRUNCATE and
            (c.returned is None or c.returned >= synced)]


def lose_power(img, calls, synced, rng, how='random', missing=None):
    """img, the file as the log began, made what the file may hold
    after a power loss at the log's end: calls and synced as read_log
    gives them, rng a random.Random choosing what of the unsynced calls
    reached the disk, how how: 'random' (each page none, all or some of
    them, in order), 'lost' (none), 'kept' (all), 'torn' (each sector
    of a page some of them, in order, as a disk that writes a page in
    sectors may) or 'one-lost' (all but the call whose seq is missing,
    as a disk that reorders writes may leave)."""
    later = []
    last_synced = {}                    # page: seq of its last synced call
    for c in calls:
        if c.kind == FTRUNCATE:
            c.apply(img)
        elif c.returned is not None and c.returned < synced:
            c.apply(img)
            for page in c.pages():
                last_synced[page] = c.seq
        elif how == 'one-lost':
            if c.seq != missing:
                c.apply(img)
        else:
            later.append(c)
    pending = {}
    for c in later:
        for page in c.pages():
            if c.seq > last_synced.get(page, -1):
                pending.setdefault(page, []).append(c)
    for page, page_calls in pending.items():
        if how == 'torn':
            for at in range(page * PAGE, (page + 1) * PAGE, SECTOR):
                n = rng.randint(0, len(page_calls))
                for c in page_calls[:n]:
                    c.apply(img, at, at + SECTOR)
            continue
        # None, all or some: the extremes are the telling cases.
        n = {'lost': 0, 'kept': len(page_calls)}.get(
            how, rng.choice((0, len(page_calls),
                             rng.randint(0, len(page_calls)))))
        for c in page_calls[:n]:
            c.apply(img, page * PAGE, (page + 1) * PAGE)


class FileImage:
    """A file that lose_power changes in place, as it would a bytearray
    of it: the harnesses' overlays are mostly holes, and a copy in
    memory, written back whole, costs more than the rest of a cut."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR)

    def __len__(self):
        return os.fstat(self.fd).st_size

    def __setitem__(self, span, data):
        os.pwrite(self.fd, data, span.start)

    def __delitem__(self, span):
        if span.start < len(self):
            os.ftruncate(self.fd, span.start)

    def extend(self, zeros):
        os.ftruncate(self.fd, len(self) + len(zeros))

    def close(self):
        os.close(self.fd)


def copy_image(src, dst, chunk=65536):
    """The file src copied to dst, its runs of zeros left as holes."""
    zeros = bytes(chunk)
    with open(src, 'rb') as f, open(dst, 'wb') as g:
        size = os.fstat(f.fileno()).st_size
        for at in range(0, size, chunk):
            piece = f.read(chunk)
            if piece != zeros[:len(piece)]:
                g.seek(at)
                g.write(piece)
        g.truncate(size)


def lose_power_in(path, start, calls, synced, rng, how='random',
                  missing=None):
    """The file at path made what it may hold after a power loss: the
    file start as the log began, with lose_power's choices."""
    copy_image(start, path)
    img = FileImage(path)
    try:
        lose_power(img, calls, synced, rng, how, missing)
    finally:
        img.close()
