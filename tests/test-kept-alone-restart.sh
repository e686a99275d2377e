#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A kept overlay the fill completed stands alone after a restart, as it
# did within the run that completed it: its file keeps the plugin's
# facts, so no connection opens the plugin (nbdkit's log filter records
# no open), and it is served, over four connections, with its source
# gone (a plugin whose every open fails).  The same for a named
# export's file, from its first connection.
. "$abs_top_srcdir/tests/functions.sh"
requires_plugin eval

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 8 * M ))
ov=$tmp/ov.cow stats=$tmp/stats.json
uri="nbd+unix:///?socket=$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
  cow-fill=true cow-stats="$stats"
nbdsh -u "$uri" -c 'h.pwrite(b"w" * 4096, 4096); h.flush()'
nbdsh -u "nbd+unix:///foo?socket=$tmp/sock" \
  -c 'h.pwrite(b"w" * 4096, 4096); h.flush()'
fill_state_is "$stats" complete
fill_state_is "$stats" complete foo
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
cp "$tmp/base" "$tmp/want"
printf 'w%.0s' $(seq 4096) | dd of="$tmp/want" bs=4096 seek=1 conv=notrunc 2>/dev/null

# The same plugin: nothing opens it.
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow --filter=log file "$tmp/base" \
  logfile="$tmp/log" cow-file="$ov"
nbdcopy --connections=4 "$uri" "$tmp/copy"
cmp "$tmp/copy" "$tmp/want" || fail "the overlay reads wrong after a restart"
nbdcopy --connections=4 "nbd+unix:///foo?socket=$tmp/sock" "$tmp/copy-foo"
cmp "$tmp/copy-foo" "$tmp/want" || fail "export foo reads wrong after a restart"
opens=$(grep -c ' Connect ' "$tmp/log" || true)
[ "$opens" -eq 0 ] || fail "the plugin was opened $opens times after the restart"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# The source gone: every open of the plugin fails.
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow eval open='exit 1' \
  get_size="echo $(( 8 * M ))" pread='exit 1' cow-file="$ov"
nbdcopy --connections=4 "$uri" "$tmp/copy2" ||
  fail "not served with its source gone: $(cat "$tmp/sock.err")"
cmp "$tmp/copy2" "$tmp/want" || fail "the overlay reads wrong with its source gone"
nbdcopy --connections=4 "nbd+unix:///foo?socket=$tmp/sock" "$tmp/copy2-foo" ||
  fail "foo not served with its source gone: $(cat "$tmp/sock.err")"
cmp "$tmp/copy2-foo" "$tmp/want" || fail "foo reads wrong with its source gone"
nbdsh -u "$uri" -c 'h.pwrite(b"x" * 512, 0); h.flush()' ||
  fail "no write with the source gone"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
"$NBDCOW" info --json "$ov" | jq -e '.complete and .plugin_facts_kept' >/dev/null ||
  fail "nbdcow info: $("$NBDCOW" info --json "$ov")"
"$NBDCOW" info "$ov" | grep -q 'serves without its base, the plugin.s facts kept' ||
  fail "nbdcow info: $("$NBDCOW" info "$ov")"
