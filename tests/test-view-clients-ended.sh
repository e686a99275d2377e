#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Under cow-lifetime=clients a kept overlay's view ends with the
# overlay once its last client has left, nbdkit still running: view
# show notes it, deleting it and a client reading EXPORT@NAME are
# refused saying so (not that nbdkit restarted), and its checkpoint
# remains.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
serve_views cow-file="$tmp/ov.cow" cow-lifetime=clients:0 \
  cow-stats="$tmp/stats.json"
nbdsh -u "$uri" -c 'h.pwrite(b"\1" * 65536, 0); h.flush()'
"$NBDCOW" view create "$ctl" "" v >/dev/null
# No client now: the overlay closes (the statistics count it closed).
for i in $(seq 50); do
  jq -e '.overlays.closed >= 1' "$tmp/stats.json" >/dev/null 2>&1 && break
  sleep 0.1
done
jq -e '.overlays.closed >= 1' "$tmp/stats.json" >/dev/null ||
  fail "the overlay did not end with its last client"

ended_with_overlay='ended with the overlay that made it \(views do not survive their overlay.s end: under cow-lifetime=clients it ends once its last client has left, or as nbdkit stops\)'
"$NBDCOW" view show "$ctl" "" > "$tmp/show"
grep -qE "^note: view v $ended_with_overlay; its checkpoint v remains$" \
  "$tmp/show" || fail "view show says: $(cat "$tmp/show")"
expect_exit 1 "view \"v\" $ended_with_overlay; its checkpoint \"v\" remains" \
  "$NBDCOW" view delete "$ctl" "" v
nbdinfo --size "nbd+unix:///@v?socket=$tmp/sock" 2>/dev/null &&
  fail "a client read view v after its overlay ended"
grep -qE "export \"@v\": view \"v\" of export \"\" $ended_with_overlay" \
  "$tmp/sock.err" || fail "nbdkit's log does not say why @v is refused"
grep -q "restart" "$tmp/sock.err" && fail "nbdkit's log speaks of a restart"
"$NBDCOW" checkpoint list "$ctl" "" | grep -qx v ||
  fail "checkpoint v is gone with the overlay"
echo "a view that ended with its overlay is refused saying so"
