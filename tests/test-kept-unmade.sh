#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A kept overlay whose header never reached the disk: the filter lays a
# new file out when the first client connects (cut to length, then its
# header written and synced), so a power loss in between leaves a file
# of holes.  Nothing was ever written to it, so it is a new overlay,
# laid out again; a file of the same length holding any data is still
# refused as not an overlay.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 10M "$tmp/base"
truncate -s 1M "$tmp/unmade"              # holes only
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
  cow-file="$tmp/unmade"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" \
  -c "h.pwrite(b'data', 4096); h.flush()" || fail "a file of holes refused"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
start_nbdkit "$tmp/sock2" --filter=cow file "$tmp/base" \
  cow-file="$tmp/unmade"
nbdsh -u "nbd+unix:///?socket=$tmp/sock2" \
  -c "assert h.pread(4, 4096) == b'data'" || fail "the new overlay's data"

truncate -s 1M "$tmp/data"
printf 'x' | dd of="$tmp/data" bs=1 seek=$(( 512 << 10 )) conv=notrunc \
  status=none
expect_start_failure "cow-file=$tmp/data: not a cow overlay \\(bad magic\\)" \
  --filter=cow file "$tmp/base" cow-file="$tmp/data"
