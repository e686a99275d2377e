#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The parameters are one list wherever they are named: those the filter
# parses (filters/cow/params.c), its --help, the man page's SYNOPSIS
# and its items, and the README's table.  A parameter added, renamed or
# removed in one place and not the others fails here.
. "$abs_top_srcdir/tests/functions.sh"

src=$abs_top_srcdir
pod=$src/docs/nbdkit-cow-filter.pod
list () { grep -o 'cow-[a-z-]*' | sort -u | tr '\n' ' '; }

parsed=$(grep -o 'strcmp (key, "cow-[a-z-]*")' "$src/filters/cow/params.c" | list)
help=$("$NBDKIT" --filter=cow memory 1M --help 2>&1 | grep '^cow-' | list)
synopsis=$(sed -n '/^=head1 SYNOPSIS/,/^=head1 /p' "$pod" | grep -o 'cow-[a-z-]*=' | list)
items=$(grep '^=item B<cow-' "$pod" | list)
readme=$(grep '^| `cow-' "$src/README.md" | sed 's/^| `\([a-z-]*\).*/\1/' | list)

echo "parsed: $parsed"
[ -n "$parsed" ] || fail "no parameter found in params.c"
for where in help synopsis items readme; do
  [ "${!where}" = "$parsed" ] ||
    fail "$where names [${!where}], the filter parses [$parsed]"
done
