#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A $TMPDIR that does not exist, is not a directory or is not writable
# stops nbdkit at start with TMPDIR and its value named.
. "$abs_top_srcdir/tests/functions.sh"

# valgrind keeps its own files in $TMPDIR and refuses to start without
# a usable one, before nbdkit could say anything.
[ -z "${COW_VALGRIND_LOGDIR:-}" ] || skip "valgrind itself needs a usable \$TMPDIR"

TMPDIR=$tmp/does-not-exist \
  expect_start_failure "TMPDIR=$tmp/does-not-exist" --filter=cow memory 1M
touch "$tmp/file"
TMPDIR=$tmp/file expect_start_failure "TMPDIR=$tmp/file" --filter=cow memory 1M

# Root writes anywhere, so "not writable" needs a read-only filesystem.
mkdir "$tmp/ro"
if mount -t tmpfs -o ro,size=1m tmpfs "$tmp/ro" 2>/dev/null; then
  on_exit "umount '$tmp/ro'"
  TMPDIR=$tmp/ro expect_start_failure "TMPDIR=$tmp/ro.*Read-only" \
    --filter=cow memory 1M
elif [ "$(id -u)" -ne 0 ]; then
  chmod 0500 "$tmp/ro"
  TMPDIR=$tmp/ro expect_start_failure "TMPDIR=$tmp/ro" --filter=cow memory 1M
else
  skip "cannot mount a read-only filesystem here"
fi
