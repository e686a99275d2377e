#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The lock order is one order: every arrow of docs/design.md's drawing
# ("Lock order") goes from a lock to one of a higher rank in
# filters/cow/lockranks.h, which checked builds enforce, and every lock
# ranked there is in the drawing.  A lock the drawing names without a
# rank holds nothing inside it (CHECKS_RANK_LEAF, checks.h): no arrow
# may leave it.
. "$abs_top_srcdir/tests/functions.sh"

$PYTHON - "$abs_top_srcdir/docs/design.md" \
  "$abs_top_srcdir/filters/cow/lockranks.h" <<'PY'
import re
import sys

design, header = sys.argv[1:]
LEAF = 0xff


def fail(msg):
    sys.exit('FAIL: ' + msg)


# "LOCK_RANK_X = N [| CHECKS_RANK_SEVERAL], /* name */"
ranks = {}
for m in re.finditer(r'LOCK_RANK_\w+ = (\d+)[^,]*, */\* (.+?) \*/',
                     open(header).read()):
    ranks[m.group(2)] = int(m.group(1))
if not ranks:
    fail('no ranks in ' + header)

text = open(design).read()
m = re.search(r'### Lock order\n\n```\n(.*?)```', text, re.S)
if not m:
    fail('no drawing of the lock order in ' + design)


def labels(line):
    """The column of a line's first lock, and its locks in order."""
    for glyph in ('├─▶', '└─▶', '│'):
        line = line.replace(glyph, ' ' * len(glyph))
    col = len(line) - len(line.lstrip())
    line = re.sub(r'\([^)]*\)', '', line)
    return col, [re.sub(r'\s+', ' ', n).strip() for n in line.split('─▶')]


edges, seen, stack = [], [], []     # stack: (column, last lock)
for line in m.group(1).split('\n'):
    if not line.strip():
        stack = []
        continue
    col, names = labels(line)
    while stack and stack[-1][0] >= col:
        stack.pop()
    if names[0] == 'any of the above':
        edges += [(s, names[1]) for s in seen]
        names = names[1:]
    elif stack:
        edges.append((stack[-1][1], names[0]))
    edges += list(zip(names, names[1:]))
    seen += names
    stack.append((col, names[-1]))

for name in ranks:
    if name not in seen:
        fail('%s has a rank but is not in the drawing of the lock order' % name)
for a, b in edges:
    ra, rb = ranks.get(a, LEAF), ranks.get(b, LEAF)
    if ra >= rb:
        fail('the drawing takes %s (rank %d) inside %s (rank %d)' %
             (b, rb, a, ra))
    print('in rank: %s (%d) -> %s (%d)' % (a, ra, b, rb))
PY
