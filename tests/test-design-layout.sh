#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# docs/design.md's layout table matches the tree: every unit of the
# filter, kept/, common/ and nbdcow (a .c, a .h, or both, tests aside)
# is named in it, by its path or, within the row of a file of its
# folder, by its name; and every path the table gives exists.
. "$abs_top_srcdir/tests/functions.sh"

cd "$abs_top_srcdir"
$PYTHON - docs/design.md filters/cow/*.[ch] common/*.[ch] kept/*.[ch] \
  tools/nbdcow/*.[ch] <<'PY'
import os
import re
import sys

design, files = sys.argv[1], sys.argv[2:]


def fail(msg):
    sys.exit('FAIL: ' + msg)


m = re.search(r'^\| file \| what \|\n\|---\|---\|\n((?:\|.*\n)+)',
              open(design).read(), re.M)
if not m:
    fail('no layout table in ' + design)
rows = []                       # (folder, first column, whole row)
for row in m.group(1).splitlines():
    first = row.split('|')[1]
    paths = re.findall(r'`([^`]+)`', first)
    if not paths:
        fail('a row of the layout table names no file: ' + row)
    for path in paths:
        if '/' in path and not os.path.exists(path):
            fail('the layout table names %s, which does not exist' % path)
    rows.append((os.path.dirname(paths[0]), first, row))

units = sorted({os.path.splitext(f)[0] for f in files
                if not os.path.basename(f).startswith(('test-', 'fuzz'))})
for unit in units:
    folder, name = os.path.split(unit)
    named = any('`%s.%s`' % (unit, ext) in first
                for _, first, _ in rows for ext in 'ch') or \
        any(f == folder and re.search(r'`%s\.[ch]`' % re.escape(name), row)
            for f, _, row in rows)
    if not named:
        fail('docs/design.md\'s layout table does not name %s' % unit)
print('%d units, each in the layout table' % len(units))
PY
