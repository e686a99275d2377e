#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The locks are one list: every lock the sources declare (a mutex_t, a
# counted lock, the stripes' write locks, a range lock, a gate) has a row in
# docs/design.md's table of locks that names it and its owner's file,
# and every lock the table names is declared.  A lock added, renamed or removed in the code
# and not in the table fails here.
. "$abs_top_srcdir/tests/functions.sh"

src=$abs_top_srcdir
design=$src/docs/design.md
# The table: from its header row to the first line that is no row.
table=$(sed -n '/^| lock | owner | guards |$/,/^$/p' "$design" | tail -n +3)
[ -n "$table" ] || fail "no table of locks in docs/design.md"

# "file name" for each lock declared: mutexes, and the capabilities
# over ranges (common/tsa.h), not pointers to another's lock.
declared=$(cd "$src" &&
  grep -HoE '^\s*(static )?(mutex_t|struct countedlock|struct rangelock|struct stripes|struct gate) [a-z_]+( = [A-Z_]+)?;' \
    filters/cow/*.[ch] common/*.[ch] kept/*.[ch] tools/nbdcow/*.[ch] |
  grep -v '/test-' |
  sed -E 's|^([^:]*/)?([^/:]+):.* ([a-z_]+)( = [A-Z_]+)?;$|\2 \3|' | sort -u)
[ -n "$declared" ] || fail "no lock found in the sources"

while read -r file name; do
  first=$(printf '%s\n' "$table" | awk -F'|' -v n="\`$name\`" 'index($2, n)')
  printf '%s\n' "$first" | grep -qF "\`$file\`" ||
    fail "$file declares $name, which docs/design.md's table of locks does not name with its file"
  echo "documented: $name ($file)"
done <<< "$declared"

names=$(printf '%s\n' "$declared" | awk '{ print $2 }' | sort -u)
printf '%s\n' "$table" | awk -F'|' '{ print $2 }' | grep -oE '`[a-z_]+`' |
  tr -d '`' | sort -u | while read -r name; do
  printf '%s\n' "$names" | grep -qx "$name" ||
    fail "docs/design.md's table of locks names $name, which no source declares"
done
