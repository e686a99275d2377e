#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The fill reads no range the plugin's extents call a hole, whatever
# cow-block-size: over 16 MiB with 64K of data in each MiB (at another
# place in each), and a short tail, blocks of 64K, 1M and 4M all read
# each data byte once and no hole, and the overlay then reads as the
# base.  The disk is no multiple of 4 MiB (the fill's flush interval),
# nor of a block: the last request completes the fill all the same.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
truncate -s $(( 16 * M + 100 * 1024 + 17 )) "$tmp/base"
for at in $(seq 0 15); do
  head -c 65536 /dev/urandom |
    dd of="$tmp/base" bs=4096 seek=$(( at * 256 + (at * 37) % 240 )) \
      conv=notrunc 2>/dev/null
done
uri="nbd+unix:///?socket=$tmp/sock"
for bs in 64K 1M 4M; do
  rm -f "$tmp/sock" "$tmp/log" "$tmp/stats.json"
  start_nbdkit "$tmp/sock" --filter=cow --filter=log file "$tmp/base" \
    logfile="$tmp/log" cow-block-size=$bs cow-fill=true \
    cow-stats="$tmp/stats.json"
  nbdinfo --size "$uri" >/dev/null
  fill_state_is "$tmp/stats.json" complete
  "$PYTHON" "$tests/base-reads.py" "$tmp/log" "$tmp/base" 0 ||
    fail "cow-block-size=$bs: the fill read holes, or data twice"
  nbdcopy "$uri" "$tmp/copy"
  cmp "$tmp/copy" "$tmp/base" || fail "cow-block-size=$bs: the overlay differs"
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
done
