#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow commit --progress draws a bar on a terminal (seen in tmux) that
# moves and ends at 100%, and prints a line per 10%, each once, where
# stderr is not a terminal.
. "$abs_top_srcdir/tests/functions.sh"
. "$tests/nbdcow-setup.sh"
command -v tmux >/dev/null || skip "no tmux"

cp "$tmp/base" "$tmp/target"
start_nbdkit "$tmp/slow" --filter=delay file "$tmp/target" \
  delay-write=200ms delay-zero=200ms
session=nbdcow-progress-$$
tmux new-session -d -s "$session" -x 120 -y 10 \
  "'$NBDCOW' commit --progress '$ov' 'nbd+unix:///?socket=$tmp/slow'; echo EXIT=\$?; sleep 60"
on_exit "tmux kill-session -t '$session' 2>/dev/null"
seen=
for _ in $(seq 300); do
  screen=$(tmux capture-pane -p -t "$session")
  bar=$(echo "$screen" | grep -o 'nbdcow commit \[[#.]*\] *[0-9]*%' | tail -1 || true)
  [ -n "$bar" ] && seen="$seen${seen:+
}$bar"
  case $screen in *EXIT=*) break ;; esac
  sleep 0.1
done
echo "$screen"
echo "$screen" | grep -q 'EXIT=0' || fail "commit did not end well"
echo "$seen" | sort -u
echo "$seen" | grep -q '\] 100%' || fail "no bar at 100%"
echo "$seen" | grep -Eq '\] +([0-9]|[1-9][0-9])%' || fail "no bar on the way"
cmp "$tmp/live.img" "$tmp/target" || fail "the commit under --progress"

# Off a terminal, a fast commit too prints every step of 10%, once.
"$NBDCOW" commit --progress "$ov" "$tmp/target" 2>"$tmp/lines" >/dev/null
cat "$tmp/lines"
[ "$(cat "$tmp/lines")" = "$(for p in $(seq 0 10 100); do
  echo "nbdcow commit: $p%"; done)" ] || fail "not a line per 10% off a terminal"
true
