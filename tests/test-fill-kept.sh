#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A kept overlay's fill (cow-fill, cow-file) cut short by kill -9 goes
# on where it stood after a restart: over three kills at random moments
# the plugin (behind nbdkit's log filter) reads the base's data, and
# no hole, at most once plus one window per kill (a flush every 4 MiB
# filled and the cow-fill-requests then in flight), and the final
# overlay reads as the base: served over zeros, and exported with no
# backing file.  Opened again, it is complete at once.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 48 * M ))
uri="nbd+unix:///?socket=$tmp/sock"
serve ()
{
  rm -f "$tmp/sock"
  start_nbdkit "$tmp/sock" --filter=cow --filter=log file "$tmp/base" \
    logfile="$tmp/log" logappend=true cow-file="$tmp/ov" \
    cow-base-handles=1 cow-fill=true cow-fill-rate=16M cow-stats="$tmp/stats"
  # The default export's overlay starts when a client opens it.
  nbdinfo --size "$uri" >/dev/null
}
kills=3
pick_seed
for i in $(seq $kills); do
  serve
  sleep "$(( RANDOM % 10 )).$(( RANDOM % 10 ))e-1"
  kill -9 "$(cat "$tmp/sock.pid")"
  sleep 0.2
done
serve
fill_state_is "$tmp/stats" complete
# Every data byte read, no hole, and at most a window again per kill:
# 4 MiB and the default 4 requests of 256 KiB.
window=$(( 4 * M + 4 * 256 * 1024 ))
"$PYTHON" "$tests/base-reads.py" "$tmp/log" "$tmp/base" $(( kills * window )) ||
  fail "more than the data and a window per kill read, or a hole"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
# The overlay alone now reads as the base: from a server over zeros.
truncate -s $(( 48 * M )) "$tmp/zeros"
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/zeros" cow-file="$tmp/ov"
nbdcopy "$uri" "$tmp/copy"
cmp "$tmp/copy" "$tmp/base" || fail "the filled overlay is not the base"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
# Complete, it says so, and exports as a qcow2 file of its own.
"$NBDCOW" info "$tmp/ov" | grep -q '^complete: yes' ||
  fail "info: $("$NBDCOW" info "$tmp/ov")"
"$NBDCOW" export "$tmp/ov" "$tmp/alone.qcow2" | grep -q standalone ||
  fail "no standalone export"
[ -z "$(qemu-img info --output=json "$tmp/alone.qcow2" | jq -r '."backing-filename" // empty')" ] ||
  fail "the standalone export has a backing file"
qemu-img compare -q "$tmp/alone.qcow2" "$tmp/base" ||
  fail "the standalone export is not the base"
echo "the fill resumed after each kill and left the base whole in the overlay"

# Opened again, the complete overlay hands out no request of the fill:
# it is complete at once, without walking the disk.
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" -v --filter=cow file "$tmp/base" \
  cow-file="$tmp/ov" cow-fill=true cow-stats="$tmp/stats"
nbdinfo --size "$uri" >/dev/null
fill_state_is "$tmp/stats" complete
grep -q 'cow-fill: export "": the overlay holds every block' "$tmp/sock.err" ||
  fail "the complete overlay was walked again"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
