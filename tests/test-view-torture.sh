#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Point-in-time views made and deleted at random moments while four
# connections write, zero and trim: each reads as the disk was at its
# instant, and its changes since the view before are the blocks written
# between them (tests/view-torture.py).  Once they are deleted the
# space counted against cow-max-size, and the files' bytes on the
# filesystem, are the blocks' alone.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 16 * 1024 * 1024 ))
stats=$tmp/stats.json
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-max-size=1G \
  cow-view-separator=@ cow-changes-separator=+ cow-control="$tmp/ctl" \
  cow-stats="$stats"
pick_seed
"$PYTHON" "$tests/view-torture.py" "$tmp/sock" "$tmp/ctl" "$NBDCOW" \
  "$tmp/base" "$(rounds 12 4)" "$seed"
# Every view deleted, the files hold the blocks' bytes alone (with 256K
# for the filesystem's own blocks): the places views kept are given
# back to the filesystem, not only to the count.
sleep 1.2
jq -e '.server.throwaway_bytes_on_disk <= .server.space.used + 262144' \
  "$stats" >/dev/null ||
  fail "the files hold more than the blocks: $(jq -c .server "$stats")"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
jq -e '.exports[0].view == null and
       .server.space.used == .exports[0].blocks.overlay * (65536 + 16)' \
  "$stats" >/dev/null ||
  fail "space after the views: $(jq -c '[.server.space, .exports[0].blocks,
                                          .exports[0].view]' "$stats")"
