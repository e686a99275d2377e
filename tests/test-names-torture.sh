#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Torture by export names (tests/name-torture.py): four clients at once
# open random names over the file plugin's dir= (its exports, clones
# with plain and hostile tags, names it does not have), write and read
# their quarter of the disk against a model, leave cleanly or drop their
# socket, while overlays end with their clients (grace 0.05 s), with
# plugin handles shared and not, throw-away and kept.  Every read
# matches the model, every name the plugin lacks is refused, every
# other name served, the server never dies and the files stay as they
# were.
. "$abs_top_srcdir/tests/functions.sh"

# The same length instrumented: a race or a bad access shows in the
# paths taken, which every run takes many times over.
seconds=8
mkdir "$tmp/dir" "$tmp/kept"
make_base "$tmp/dir/a" $((1024 * 1024))
make_base "$tmp/dir/b" $((1024 * 1024))
sums=$(md5sum "$tmp/dir/a" "$tmp/dir/b")

pick_seed
for run in "temp 0" "temp 1" "kept 1"; do
  read -r mode handles <<< "$run"
  args=(cow-base-handles="$handles")
  [ "$mode" = kept ] && args+=(cow-file="$tmp/kept/disk")
  sock=$tmp/$mode-$handles.sock
  start_nbdkit "$sock" --filter=cow file dir="$tmp/dir" \
    cow-clone-separator=@ cow-lifetime=clients:0.05 cow-max-exports=64 \
    "${args[@]}"
  $PYTHON "$tests/name-torture.py" "$sock" "$mode" "$seconds" "$seed" \
    "$tmp/dir" > "$tmp/out" || fail "$run (seed $seed): $(cat "$tmp/out")"
  echo "$mode, cow-base-handles=$handles: $(cat "$tmp/out")"
  kill -0 "$(cat "$sock.pid")" || fail "$run: the server died: $(cat "$sock.err")"
  jq -e '.sessions > 0 and .refused > 0' "$tmp/out" >/dev/null ||
    fail "$run: no session served, or none refused"
done
[ "$(md5sum "$tmp/dir/a" "$tmp/dir/b")" = "$sums" ] || fail "a base file changed"
