#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Under cow-base-handles=1, first connections racing to open a new
# export each open the plugin before its overlay exists; the handles of
# those that lose the race are closed at once: once nbdkit has exited,
# nbdkit's log filter shows every handle opened closed again.  The
# plugin's open is slowed down so that the four connections race.  The
# log filter interns a string as each context opens, in a list nbdkit
# does not lock for contexts no connection owns: the filter opens them
# one at a time, else ThreadSanitizer reports the race and AddressSanitizer
# may catch a double free.
. "$abs_top_srcdir/tests/functions.sh"
requires_filter delay

for round in 1 2 3; do
  rm -f "$tmp/sock" "$tmp/log"
  start_nbdkit "$tmp/sock" --filter=cow --filter=log --filter=delay \
    memory 1M logfile="$tmp/log" delay-open=300ms cow-base-handles=1
  pids=
  for _ in 1 2 3 4; do
    nbdinfo --size "nbd+unix:///?socket=$tmp/sock" >/dev/null &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p" || fail "round $round: a client failed"; done
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
  opened=$(grep -c ' Connect ' "$tmp/log" || true)
  closed=$(grep -c ' Disconnect ' "$tmp/log" || true)
  echo "round $round: $opened handles opened, $closed closed"
  [ "$opened" -eq "$closed" ] ||
    fail "round $round: $opened handles opened, $closed closed"
done
