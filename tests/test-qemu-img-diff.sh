#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The documented recipe for saving the changes: a qcow2 backed by the
# NBD export, rebased onto the base file, is a diff that over the base
# equals what the clients saw, and holds no more than the changes.  The
# same holds for a kept overlay (cow-file) served again after nbdkit
# was stopped.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 32 * 1024 * 1024 ))
cp --sparse=always "$tmp/base" "$tmp/expected"
uri="nbd+unix:///?socket=$tmp/sock"
write_changes ()
{
  nbdsh -u "$uri" -c '
h.pwrite(b"diff" * 1024, 3 * 1024 * 1024)
h.pwrite(b"more" * 10, 20 * 1024 * 1024 + 7)
'
}
printf 'diff%.0s' $(seq 1024) |
  dd of="$tmp/expected" bs=1 seek=$(( 3 * 1024 * 1024 )) conv=notrunc status=none
printf 'more%.0s' $(seq 10) |
  dd of="$tmp/expected" bs=1 seek=$(( 20 * 1024 * 1024 + 7 )) conv=notrunc status=none

# diff_and_compare WHAT: the recipe against the server on $uri.
diff_and_compare ()
{
  rm -f "$tmp/diff.qcow2"
  qemu-img create -q -f qcow2 -b "$uri" -F raw "$tmp/diff.qcow2"
  qemu-img rebase -b "$tmp/base" -F raw "$tmp/diff.qcow2"
  qemu-img compare "$tmp/diff.qcow2" "$tmp/expected" ||
    fail "$1: diff over base differs"
  # Only the clusters that changed are in the diff.
  allocated=$(qemu-img map --output=json "$tmp/diff.qcow2" |
    "$PYTHON" -c 'import json, sys
print(sum(e["length"] for e in json.load(sys.stdin) if e["depth"] == 0 and e["data"]))')
  [ "$allocated" -le $(( 4 * 65536 )) ] || fail "$1: diff holds $allocated bytes"
}

start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base"
write_changes
diff_and_compare "throw-away overlay"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"

start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/kept"
write_changes
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/kept"
diff_and_compare "kept overlay after a restart"
