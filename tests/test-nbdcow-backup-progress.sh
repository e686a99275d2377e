#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow backup --progress is never silent: after the copy's bar or
# lines reach 100% it says that it deletes the view, and when it has,
# each on a line of its own, on a terminal (seen in tmux) and off one.
. "$abs_top_srcdir/tests/functions.sh"
command -v tmux >/dev/null || skip "no tmux"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
serve_views cow-file="$tmp/ov.cow"
nbdsh -u "$uri" -c 'h.pwrite(b"\1" * (1 << 20), 0); h.flush()'

"$NBDCOW" backup --progress "$ctl" "$uri" b0 "$tmp/b0.qcow2" \
  2>"$tmp/lines" >/dev/null
cat "$tmp/lines"
[ "$(cat "$tmp/lines")" = "$(for p in $(seq 0 10 100); do
  echo "nbdcow backup: $p%"; done
  echo 'nbdcow backup: deleting view "b0" (the server gives back what only it kept)'
  echo 'nbdcow backup: view deleted')" ] ||
  fail "off a terminal, not a line per 10% then the view's deletion"

session=nbdcow-backup-progress-$$
tmux new-session -d -s "$session" -x 160 -y 10 \
  "'$NBDCOW' backup --progress --base='$tmp/b0.qcow2' '$ctl' '$uri' b1 '$tmp/b1.qcow2' >/dev/null; echo EXIT=\$?; sleep 60"
on_exit "tmux kill-session -t '$session' 2>/dev/null"
for _ in $(seq 100); do
  screen=$(tmux capture-pane -p -t "$session")
  case $screen in *EXIT=*) break ;; esac
  sleep 0.1
done
echo "$screen"
echo "$screen" | grep -q 'EXIT=0' || fail "the backup did not end well"
echo "$screen" | grep -q '^nbdcow backup \[#*\] 100%' ||
  fail "no bar at 100% on a line of its own"
echo "$screen" | grep -A1 '^nbdcow backup: deleting view "b1"' |
  grep -qx 'nbdcow backup: view deleted' ||
  fail "on a terminal, the view's deletion not said after the bar"
echo "backup --progress says every step"
