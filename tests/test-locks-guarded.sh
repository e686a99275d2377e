#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# What each lock protects is said twice, and the two agree: at each
# field or variable, GUARDED_BY (LOCK) or FIELD_GUARDED_BY (LOCK)
# (common/tsa.h), and in the "guards" column of docs/design.md's table
# of locks.  Each annotated name is in its lock's row (the row naming
# the lock, and the file where several rows share its name), and no
# row names an annotated name that is not annotated with its lock.
. "$abs_top_srcdir/tests/functions.sh"

cd "$abs_top_srcdir"
"$PYTHON" - docs/design.md filters/cow/*.[ch] common/*.[ch] kept/*.[ch] \
  tools/nbdcow/*.[ch] <<'PYEOF' || fail "see above"
import os, re, sys

design, sources = sys.argv[1], [s for s in sys.argv[2:]
                                if not os.path.basename(s).startswith('test-')]
text = open(design).read()
start = text.index('| lock | owner | guards |')
rows = []
for line in text[start:].split('\n')[2:]:
    if not line.startswith('|'):
        break
    cells = line.split('|')[1:-1]
    rows.append((cells[0], cells[1], cells[2]))

annotated = {}                  # (lock, name) -> file
pattern = re.compile(r'\b([a-z_][a-z0-9_]*)\s*(?:\[[^]]*\])?\s+'
                     r'(?:FIELD_)?GUARDED_BY \(([a-z_]+)\)')
for path in sources:
    for m in pattern.finditer(open(path).read()):
        annotated[(m.group(2), m.group(1))] = os.path.basename(path)
if len(annotated) < 30:
    sys.exit('only %d annotated names found' % len(annotated))

def row_of(lock, file):
    named = [r for r in rows if '`%s`' % lock in r[0]]
    if len(named) > 1:
        named = [r for r in named if '`%s`' % file in r[1]] or named
    return named[0] if len(named) == 1 else None

failed = False
for (lock, name), file in sorted(annotated.items()):
    row = row_of(lock, file)
    if row is None:
        print('%s: %s is guarded by %s, which no one row of the table of '
              'locks names' % (file, name, lock))
        failed = True
    elif '`%s`' % name not in row[2]:
        print('%s: %s is guarded by %s, whose row of the table of locks '
              'does not name it' % (file, name, lock))
        failed = True
names = {name for _, name in annotated}
for lock_cell, owner, guards in rows:
    locks = re.findall(r'`([a-z_]+)`', lock_cell)
    for word in re.findall(r'`([a-z_]+)`', guards):
        if word in names and not any((l, word) in annotated for l in locks):
            print('docs/design.md: the row of %s names %s, which the sources '
                  'guard with another lock' % (lock_cell.strip(), word))
            failed = True
print('%d annotated names checked against %d rows' % (len(annotated), len(rows)))
sys.exit(1 if failed else 0)
PYEOF
