#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The power-loss model of tests/powermodel.py, on logs written by hand
# as tests/power-log.c writes them: a write returned before a sync
# that succeeded began is on disk whatever else the log holds, also
# when another sync that began earlier ends later (a header's sync
# beside a flush's); a write no sync covers may be lost, page by page,
# and, as tests/crash-points.py asks, all lost, all kept, torn by
# sector, or all kept but one; a file changed in place (lose_power_in)
# ends as a copy in memory would.
. "$abs_top_srcdir/tests/functions.sh"

PYTHONPATH=$tests $PYTHON - "$tmp/log" "$tmp/start" "$tmp/img" <<'PY'
import random
import sys

import powermodel as pm

path, start, img_path = sys.argv[1:4]
PAGE = pm.PAGE


def log(*records):
    """Writes records (kind, seq[, offset, data]) as the shim does."""
    with open(path, 'wb') as f:
        for kind, seq, *rest in records:
            offset, data = rest if rest else (0, b'')
            f.write(pm.RECORD.pack(kind, 0, seq, offset, len(data)))
            f.write(data)


def images(tries=64):
    """The distinct images a power loss at the log's end may leave."""
    calls, synced = pm.read_log(path)
    found = set()
    for seed in range(tries):
        img = bytearray(2 * PAGE)
        pm.lose_power(img, calls, synced, random.Random(seed))
        found.add(bytes(img))
    return found


A, B = b'A' * PAGE, b'B' * PAGE
W, R, S, D = pm.PWRITE, pm.RETURNED, pm.SYNC_START, pm.SYNC_DONE

# Sync 1 begins, write 2 returns, sync 3 begins and ends, then sync 1
# ends: sync 3 covers write 2.
log((S, 1), (W, 2, 0, A), (R, 2), (S, 3), (D, 3), (D, 1))
got = images()
if got != {A + bytes(PAGE)}:
    sys.exit('FAIL: a write a finished sync covered was lost when an '
             'earlier sync ended after it (%d images)' % len(got))

# No sync after write 2: it may be there or not, and write 4 on
# another page independently.
log((W, 2, 0, A), (R, 2), (W, 4, PAGE, B), (R, 4))
got = images()
if len(got) != 4:
    sys.exit('FAIL: unsynced writes gave %d images, not 4' % len(got))

# The three ways of tests/crash-points.py: every unsynced write lost,
# every one kept, or each sector of a page as some of them.
calls, synced = pm.read_log(path)
for how, want in (('lost', bytes(2 * PAGE)), ('kept', A + B)):
    img = bytearray(2 * PAGE)
    pm.lose_power(img, calls, synced, random.Random(0), how)
    if bytes(img) != want:
        sys.exit('FAIL: unsynced writes %s did not give the one image' % how)
torn = set()
for seed in range(8):
    img = bytearray(2 * PAGE)
    pm.lose_power(img, calls, synced, random.Random(seed), 'torn')
    torn.update(bytes(img[at:at + pm.SECTOR])
                for at in range(0, PAGE, pm.SECTOR))
if torn != {A[:pm.SECTOR], bytes(pm.SECTOR)}:
    sys.exit('FAIL: a torn page is not sectors old or new: %d kinds' %
             len(torn))
# All kept but one: the later write without the earlier, and the
# other way round; the unsynced are the two writes.
if pm.unsynced(calls, synced) != [2, 4]:
    sys.exit('FAIL: the unsynced writes are %r, not [2, 4]' %
             pm.unsynced(calls, synced))
for missing, want in ((2, bytes(PAGE) + B), (4, A + bytes(PAGE))):
    img = bytearray(2 * PAGE)
    pm.lose_power(img, calls, synced, random.Random(0), 'one-lost', missing)
    if bytes(img) != want:
        sys.exit('FAIL: all kept but write %d did not give the one image' %
                 missing)

# In place: a file that starts as a page of C then a hole, written past
# its end, each way as in memory.
with open(start, 'wb') as f:
    f.write(b'C' * PAGE)
    f.truncate(2 * PAGE)
log((W, 2, PAGE, A), (R, 2), (W, 4, 2 * PAGE, B))
calls, synced = pm.read_log(path)
for how in ('random', 'lost', 'kept', 'torn', 'one-lost'):
    img = bytearray(b'C' * PAGE + bytes(PAGE))
    pm.lose_power(img, calls, synced, random.Random(1), how, 2)
    pm.lose_power_in(img_path, start, calls, synced, random.Random(1), how, 2)
    with open(img_path, 'rb') as f:
        if f.read() != bytes(img):
            sys.exit('FAIL: the file changed in place differs from the '
                     'copy in memory, unsynced writes %s' % how)
print('power model: synced writes kept, unsynced ones lost page by page, '
      'or all lost, all kept, torn by sector, all kept but one; in place '
      'as in memory')
PY
