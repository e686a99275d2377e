#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-fill copies the base's data into the overlay in the background
# while four clients write and read at random (tests/fill-clients.py,
# every read checked against a model), over a base of data runs and
# holes behind nbdkit's delay and log filters: every data byte of the
# base is read once (fill and clients' misses together), but in 4K
# sectors the clients wrote whole, which are read at most once, and
# holes never;
# the statistics say complete; then the shared plugin handle closes,
# and a new client's reads and cache requests and an nbdcopy over four
# connections make no call of the plugin.
# cow-fill=/PATH waits while PATH is missing.  Without cow-base-handles
# the fill reads through one handle of its own, which closes when it is
# complete.  An empty disk is complete at once.
. "$abs_top_srcdir/tests/functions.sh"
requires_filter delay

M=$(( 1024 * 1024 ))
truncate -s $(( 32 * M )) "$tmp/base"
for at in 0 5 12 31; do
  head -c $M /dev/urandom |
    dd of="$tmp/base" bs=$M seek=$at conv=notrunc 2>/dev/null
done
uri="nbd+unix:///?socket=$tmp/sock"
stats=$tmp/stats.json
start_nbdkit "$tmp/sock" --filter=cow --filter=log --filter=delay \
  file "$tmp/base" logfile="$tmp/log" rdelay=1ms cow-base-handles=1 \
  cow-fill="$tmp/go" cow-fill-rate=64M cow-stats="$stats"

"$PYTHON" "$tests/fill-clients.py" "$uri" "$tmp/base" "$stats" "$tmp/go" \
  "$tmp/want" || fail "a client read wrong"
jq -e '.exports[0].fill | .state == "complete" and
       .filled_bytes == 33554432 and .to_go_bytes == 0 and .error == null' \
  "$stats" >/dev/null ||
  fail "fill statistics: $(jq -c '.exports[0].fill' "$stats")"

# Every data byte of the base read once, but where clients wrote whole
# sectors, no hole read at all.
"$PYTHON" "$tests/base-reads.py" "$tmp/log" "$tmp/base" 0 "$tmp/want.written" ||
  fail "the base was not read once"

# The shared handle closed, a new client and a copy over four
# connections make no call of the plugin.
handles_closed "$tmp/log"
calls_before=$(plugin_calls "$tmp/log")
nbdsh -u "$uri" -c "
want = open('$tmp/want', 'rb').read()
assert h.pread(len(want), 0) == want, 'a new client reads wrong'
assert h.can_cache(), 'the plugin caches: a stand-alone export says so'
h.cache(len(want), 0)
"
nbdcopy --connections=4 "$uri" "$tmp/copy"
cmp "$tmp/copy" "$tmp/want" || fail "the copy-out differs"
no_plugin_call_since "$tmp/log" "$calls_before" \
  "after the fill the plugin was called"
echo "the fill read each data byte once beside four clients, and stands alone"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# Without cow-base-handles: one more plugin handle, the fill's own.
rm -f "$tmp/sock" "$tmp/log"
start_nbdkit "$tmp/sock" --filter=cow --filter=log file "$tmp/base" \
  logfile="$tmp/log" cow-fill=true cow-stats="$stats"
nbdinfo --size "$uri" >/dev/null
fill_state_is "$stats" complete
jq -e '.exports[0] | .fill.state == "complete" and .plugin_opens == 2' \
  "$stats" >/dev/null ||
  fail "fill without shared handles: $(jq -c '.exports[0] | {fill, plugin_opens}' "$stats")"
"$PYTHON" "$tests/base-reads.py" "$tmp/log" "$tmp/base" 0 ||
  fail "the base was not read once by the fill's own handle"
# Complete, the fill's handle closes, and new connections open none.
handles_closed "$tmp/log"
calls_before=$(plugin_calls "$tmp/log")
nbdcopy --connections=4 "$uri" "$tmp/copy"
cmp "$tmp/copy" "$tmp/base" || fail "the copy-out differs from the base"
no_plugin_call_since "$tmp/log" "$calls_before" \
  "after the fill a new connection called the plugin"

stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow null size=0 cow-fill=true \
  cow-stats="$stats"
nbdinfo --size "$uri" >/dev/null
fill_state_is "$stats" complete
jq -e '.exports[0].fill.state == "complete"' "$stats" >/dev/null ||
  fail "an empty disk: $(jq -c '.exports[0].fill' "$stats")"

case $("$system_nbdkit" --version) in
  "nbdkit 1."[0-3][0-9].*|"nbdkit 1.4"[0-2].*|"nbdkit 1.43."[0-8])
    mkdir "$tmp/dir"
    expect_start_failure "cow-fill=true: nbdkit .* without an export name" \
      --filter=cow file dir="$tmp/dir" cow-fill=true ;;
esac
