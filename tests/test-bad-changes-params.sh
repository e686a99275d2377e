#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-changes-separator and cow-control refused at start, each message
# naming the parameter and its value: a separator that checkpoint names
# may hold or that the clones use, a control socket's path that is a
# file, longer than a socket's path can be, or nbdkit's own socket
# (-U), however spelt, which leaves no socket behind.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 1M "$tmp/base"
for c in - . _; do
  expect_start_failure "cow-changes-separator=\\$c: checkpoint names may hold" \
    --filter=cow file "$tmp/base" cow-changes-separator="$c"
done
expect_start_failure "cow-changes-separator=@: the same as cow-clone-separator" \
  --filter=cow file "$tmp/base" cow-changes-separator=@ cow-clone-separator=@
expect_start_failure "cow-changes-separator=ab: must be one punctuation" \
  --filter=cow file "$tmp/base" cow-changes-separator=ab
touch "$tmp/plain"
expect_start_failure "cow-control=$tmp/plain: exists and is not a socket" \
  --filter=cow file "$tmp/base" cow-control="$tmp/plain"
long=$tmp/$(printf 'x%.0s' $(seq 120))
expect_start_failure "cow-control=$long: longer than a socket's path can be" \
  --filter=cow file "$tmp/base" cow-control="$long"
for spelling in "$tmp/nbd.sock" "$tmp/../${tmp##*/}/nbd.sock"; do
  expect_start_failure \
    "cow-control=$spelling: nbdkit serves NBD on this socket \\(-U $tmp/nbd.sock\\)" \
    -U "$tmp/nbd.sock" --filter=cow file "$tmp/base" cow-control="$spelling"
  [ ! -e "$tmp/nbd.sock" ] || fail "a socket was left at $tmp/nbd.sock"
done
(cd "$tmp" && expect_start_failure "cow-control=$tmp/nbd.sock: .*\\(-U ./nbd.sock\\)" \
  --unix=./nbd.sock --filter=cow file base cow-control=nbd.sock)
[ ! -e "$tmp/nbd.sock" ] || fail "a socket was left at $tmp/nbd.sock"
