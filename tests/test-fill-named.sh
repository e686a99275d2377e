#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The fill copies a named export's own data into its overlay, not the
# default export's, with a plugin whose exports differ by name: its
# handle is opened by the export's first connection, which tells the
# plugin the name.  Before nbdkit 1.44 no handle opened for sharing
# tells it one (the man page says so).
. "$abs_top_srcdir/tests/functions.sh"
requires_plugin eval
version=$("$system_nbdkit" --version | awk '{print $2}')
[ "$(printf '1.44.0\n%s\n' "$version" | sort -V | head -1)" = 1.44.0 ] ||
  skip "nbdkit $version tells a shared handle no export name"

M=$(( 1024 * 1024 ))
stats=$tmp/stats.json
# Each export reads as the first letter of its name, the default
# export as D.
start_nbdkit "$tmp/sock" --filter=cow eval \
  open='n=$3; echo "${n:-D}"' get_size="echo $(( 4 * M ))" \
  pread='head -c "$3" /dev/zero | tr "\0" "$(printf %.1s "$2")"' \
  cow-fill=true cow-stats="$stats"
nbdsh -u "nbd+unix:///foo?socket=$tmp/sock" -c 'h.pwrite(b"w" * 4096, 0)'
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c 'h.pwrite(b"w" * 4096, 0)'
fill_state_is "$stats" complete
fill_state_is "$stats" complete foo
nbdsh -u "nbd+unix:///foo?socket=$tmp/sock" -c "
got = h.pread(4 * $M, 0)
assert got == b'w' * 4096 + b'f' * (4 * $M - 4096), set(got)
" || fail "export foo reads another export's data"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "
assert h.pread(4 * $M, 0) == b'w' * 4096 + b'D' * (4 * $M - 4096)
" || fail "the default export reads wrong"
