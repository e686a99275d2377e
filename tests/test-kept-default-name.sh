#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# One name, one kept file, whatever the order of connections, endings
# and restarts, when the plugin names its default export (here
# "golden", by the exportname filter): a client of "golden" and a
# client of "" always reach the same kept file, during the server's
# life (overlays ending with their clients in between) and after a
# restart, whichever name comes first.
. "$abs_top_srcdir/tests/functions.sh"
requires_filter exportname
touch "$tmp/xattr"
"$PYTHON" -c "import os; os.setxattr('$tmp/xattr', 'user.test', b'1')" ||
  skip "the filesystem of $tmp keeps no extended attributes"

mkdir "$tmp/dir"
truncate -s 1M "$tmp/dir/golden"

# serve COW-FILE COMMAND: nbdkit over the directory, "" named golden,
# each overlay ending as its client leaves, while COMMAND runs with
# $golden and $default the URIs of the two names; then nbdkit stops.
serve ()
{
  rm -f "$tmp/sock"
  start_nbdkit "$tmp/sock" --filter=cow --filter=exportname \
    file dir="$tmp/dir" default-export=golden cow-file="$1" \
    cow-lifetime=clients:0
  golden="nbd+unix:///golden?socket=$tmp/sock"
  default="nbd+unix:///?socket=$tmp/sock"
  eval "$2" || fail "$2: $(cat "$tmp/sock.err")"
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
}
# put URI OFFSET TEXT, expect_at URI OFFSET TEXT
put () { nbdsh -u "$1" -c "h.pwrite(b'$3', $2); h.flush()"; }
expect_at ()
{
  nbdsh -u "$1" -c "got = h.pread(len(b'$3'), $2)
assert got == b'$3', 'at $2: %r, not $3' % got"
}

# The name first: its file is ov.cow.golden, which "" then shares,
# after the overlay ended too, and after restarts in either order.
mkdir "$tmp/a"
serve "$tmp/a/ov.cow" 'put "$golden" 0 first && sleep 0.3 &&
                       expect_at "$default" 0 first && put "$default" 4096 second &&
                       sleep 0.3 && expect_at "$golden" 4096 second'
serve "$tmp/a/ov.cow" 'expect_at "$golden" 0 first && expect_at "$default" 4096 second'
serve "$tmp/a/ov.cow" 'expect_at "$default" 0 first && expect_at "$golden" 4096 second'
"$NBDCOW" info "$tmp/a/ov.cow.golden" | grep -q '^blocks: 1 in the overlay' ||
  fail "ov.cow.golden does not hold both writes: $("$NBDCOW" info "$tmp/a/ov.cow.golden")"

# The default export first: its file is ov.cow, which "golden" reaches
# after a restart even before any client asks for "".
mkdir "$tmp/b"
serve "$tmp/b/ov.cow" 'put "$default" 0 third && sleep 0.3 &&
                       expect_at "$golden" 0 third'
serve "$tmp/b/ov.cow" 'expect_at "$golden" 0 third && put "$golden" 4096 fourth &&
                       sleep 0.3 && expect_at "$default" 4096 fourth'
serve "$tmp/b/ov.cow" 'expect_at "$default" 0 third && expect_at "$golden" 4096 fourth'
[ ! -e "$tmp/b/ov.cow.golden" ] || fail "a second kept file for the default export"
