#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A view that runs out of room breaks and the clients' writes go on:
# when what it keeps would leave the writes less than an eighth of
# cow-max-size, or when a write needs room the view holds.  Its reads
# then fail with EIO, the statistics and nbdcow view show say broken,
# and once it is deleted the space counted is the blocks' alone (and
# a kept file's metadata): over a throw-away overlay and a kept one.
# The same when the overlay's filesystem is full: the writes go on in
# place.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 16 * M ))
stats=$tmp/stats.json ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
view_uri="nbd+unix:///@b1?socket=$tmp/sock"

# breaks_for_room METADATA STORE-ARGS...: under cow-max-size=4M, of
# which the store's metadata takes METADATA bytes.
breaks_for_room ()
{
  local meta=$1; shift
  rm -f "$tmp/sock" "$stats"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-max-size=4M \
    cow-view-separator=@ cow-control="$ctl" cow-stats="$stats" "$@"

  # What the view keeps: 2M held, then overwritten; the view can keep
  # at most 4M - 512K - 2M, and breaks.
  nbdsh -u "$uri" -c "h.pwrite(b'a' * (2 * $M), 0)"
  "$NBDCOW" view create "$ctl" "" b1 >/dev/null
  nbdsh -u "$view_uri" -c "assert h.pread($M, 0) == b'a' * $M"
  nbdsh -u "$uri" -c "
for i in range(32):
    h.pwrite(b'b' * 65536, i * 65536)
assert h.pread(2 * $M, 0) == b'b' * (2 * $M)
" || fail "a client's write failed while the view ran out of room"
  "$NBDCOW" view show "$ctl" "" | grep -qx 'state: broken' ||
    fail "the view did not break: $("$NBDCOW" view show "$ctl" "")"
  status=0
  nbdsh -u "$view_uri" -c "h.pread(4096, 0)" 2>"$tmp/err" || status=$?
  [ "$status" -ne 0 ] && grep -q "Input/output error" "$tmp/err" ||
    fail "a broken view's read did not fail with EIO: $(cat "$tmp/err")"
  grep -q 'view "b1" broken' "$tmp/sock.err" || fail "the log does not say so"
  "$NBDCOW" view delete "$ctl" "" b1

  # A client's write that needs room the view holds takes it.
  "$NBDCOW" view create "$ctl" "" b2 >/dev/null
  nbdsh -u "$uri" -c "h.pwrite(b'c' * $M, 0)"
  kept=$("$NBDCOW" view show "$ctl" "" | sed -n 's/^kept_bytes: //p')
  [ "$kept" -gt 0 ] || fail "the view keeps nothing"
  nbdsh -u "$uri" -c "h.pwrite(b'd' * (2 * $M - 3 * 65536), 2 * $M)" ||
    fail "a write that needed the view's room failed"
  "$NBDCOW" view show "$ctl" "" | grep -qx 'state: broken' ||
    fail "the view did not give its room: $("$NBDCOW" view show "$ctl" "")"
  "$NBDCOW" view delete "$ctl" "" b2
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
  jq -e '.exports[0].view == null and
         .server.space.used == .exports[0].blocks.overlay * (65536 + 16) +
         $meta' --argjson meta "$meta" "$stats" >/dev/null ||
    fail "space after the views: $(jq -c '[.server.space, .exports[0].blocks]' \
                                          "$stats")"
}
breaks_for_room 0
# A kept file's metadata: its header and table (16K), states and marks
# of 256 blocks (4K each), and its log (128K).
breaks_for_room 155648 cow-file="$tmp/ov.cow"

# The overlay's filesystem full: the view breaks, the writes go on.
mkdir "$tmp/small"
mount -t tmpfs -o size=12m tmpfs "$tmp/small" 2>/dev/null ||
  skip "cannot mount a small tmpfs here"
on_exit "umount '$tmp/small'"
rm -f "$tmp/sock"
TMPDIR=$tmp/small start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
  cow-view-separator=@ cow-control="$ctl"
nbdsh -u "$uri" -c "h.pwrite(b'e' * (8 * $M), 0)"
"$NBDCOW" view create "$ctl" "" b3 >/dev/null
nbdsh -u "$uri" -c "
for round in b'fgh':
    for i in range(128):
        h.pwrite(bytes([round]) * 65536, i * 65536)
    assert h.pread(8 * $M, 0) == bytes([round]) * (8 * $M)
" || fail "a client's write failed when the view filled the filesystem"
"$NBDCOW" view show "$ctl" "" | grep -qx 'state: broken' ||
  fail "the view did not break: $("$NBDCOW" view show "$ctl" "")"
"$NBDCOW" view delete "$ctl" "" b3
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
