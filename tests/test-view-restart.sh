#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A kept overlay's view ends with the server, its checkpoint does not:
# after kill -9, and after a clean stop, nbdcow view show gives the view
# as ended, naming it, with a note that views do not survive a restart
# (and the statistics as ended);
# view delete and a client reading EXPORT@NAME are refused saying the
# same; the checkpoint is listed and its changes view reads.  A new
# view is live and takes the ended one's place; deleted, none is shown.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
serve () { serve_views cow-file="$tmp/ov.cow" cow-stats="$tmp/stats.json"; }
ended_with_server='ended with the nbdkit that made it \(views do not survive a restart of nbdkit\)'

# ended NAME: after a restart, view NAME is shown and refused as ended.
ended ()
{
  "$NBDCOW" view show "$ctl" "" >"$tmp/show"
  grep -qx "view: $1" "$tmp/show" && grep -qx "state: ended" "$tmp/show" &&
    grep -qE "^note: view $1 $ended_with_server; its checkpoint $1 remains$" \
      "$tmp/show" && ! grep -q "^export:" "$tmp/show" ||
    fail "view $1 shown after a restart as: $(cat "$tmp/show")"
  "$NBDCOW" view show --json "$ctl" "" | jq -e --arg n "$1" \
    '.view == {name: $n, state: "ended", kept_bytes: 0, export: null}' \
    >/dev/null || fail "view $1 shown in JSON as: $("$NBDCOW" view show \
                                                      --json "$ctl" "")"
  expect_exit 1 "view \"$1\" $ended_with_server; its checkpoint \"$1\" remains" \
    "$NBDCOW" view delete "$ctl" "" "$1"
  nbdinfo --size "nbd+unix:///@$1?socket=$tmp/sock" 2>/dev/null &&
    fail "a client read view $1 after a restart"
  grep -qE "export \"@$1\": view \"$1\" of export \"\" $ended_with_server" \
    "$tmp/sock.err" || fail "nbdkit's log does not say why @$1 is refused"
  sleep 1.2                     # the statistics, written each second
  jq -e --arg n "$1" '.exports[0].view == {name: $n, state: "ended",
                                            kept_bytes: 0}' \
    "$tmp/stats.json" >/dev/null ||
    fail "view $1 in the statistics: $(jq -c '.exports[0].view' \
                                          "$tmp/stats.json")"
  "$NBDCOW" checkpoint list "$ctl" "" | grep -qx "$1" ||
    fail "checkpoint $1 is gone after the restart"
  nbdinfo --size "nbd+unix:///+$1?socket=$tmp/sock" >/dev/null ||
    fail "the changes view since $1 does not read after the restart"
}

serve
nbdsh -u "$uri" -c 'h.pwrite(b"\1" * 65536, 0); h.flush()'
"$NBDCOW" view create "$ctl" "" v1 >/dev/null
nbdsh -u "$uri" -c 'h.pwrite(b"\2" * 65536, 0); h.flush()'
kill -9 "$(cat "$tmp/sock.pid")"
sleep 0.2
serve
ended v1

"$NBDCOW" view create "$ctl" "" v2 >/dev/null
"$NBDCOW" view show "$ctl" "" | grep -qx "state: live" ||
  fail "view v2 not live: $("$NBDCOW" view show "$ctl" "")"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
serve
ended v2

# A view deleted, then a clean stop, and then kill -9 with no flush
# after the deletion: neither shows again.
crash () { kill -9 "$1"; }
for stop in stop_nbdkit crash; do
  "$NBDCOW" view create "$ctl" "" v3 >/dev/null
  "$NBDCOW" view delete "$ctl" "" v3
  $stop "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
  sleep 0.2
  serve
  [ -z "$("$NBDCOW" view show "$ctl" "")" ] ||
    fail "a view deleted before $stop shown: $("$NBDCOW" view show "$ctl" "")"
  "$NBDCOW" checkpoint delete "$ctl" "" v3
done
echo "a kept overlay's view ends with the server, saying so; its checkpoint stays"
