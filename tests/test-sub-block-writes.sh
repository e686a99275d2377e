#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A write into a block not yet in a throw-away overlay reads from the
# plugin only the parts of the 4K sectors it covers in part (64K
# blocks, a base all data): none for whole sectors, and a read of a
# block held in part reads only the rest (tests/sub-blocks.py, every
# read and the changes view checked against a model).  The statistics
# count the blocks held in part.
. "$abs_top_srcdir/tests/functions.sh"

head -c $(( 1024 * 1024 )) /dev/urandom > "$tmp/base"
stats=$tmp/stats.json
start_nbdkit "$tmp/sock" --filter=cow --filter=log file "$tmp/base" \
  logfile="$tmp/log" cow-changes-separator=+ cow-on-cache=true \
  cow-stats="$stats"
"$PYTHON" "$tests/sub-blocks.py" "$tmp/sock" "$tmp/log" "$tmp/base" ||
  fail "tests/sub-blocks.py failed: see its message above"
# Blocks 1, 3, 4, 5 and 7 are held in part; 2 was completed, 6 written
# whole sector by sector.
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
got=$(jq -c '.exports[0] | [.blocks, .partial_blocks]' "$stats")
[ "$got" = '[{"base":9,"overlay":7,"zero":0},5]' ] ||
  fail "statistics: blocks $got"
