#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Torture of overlays that end with their clients: clones connected,
# written and left over and over with a short grace (0.1 s, 1 s under
# valgrind or a sanitizer, which connect slower), so that
# overlays end and are made again while other clones' requests,
# copy-ups (cow-on-read turned on and off), flushes and the statistics
# run (tests/clone-churn.py).  Every read matches the model: a
# throw-away clone reads as its last writes or, once its overlay has
# ended, as the golden image, never anything between; a kept one always
# as its last writes.  Both outcomes must have been seen.
. "$abs_top_srcdir/tests/functions.sh"

seconds=10
grace=$(rounds 0.1 1)
mkdir "$tmp/images" "$tmp/kept"
make_base "$tmp/images/golden" $((1024 * 1024))
sum=$(md5sum < "$tmp/images/golden")

for mode in temp kept; do
  args=()
  [ "$mode" = kept ] && args=(cow-file="$tmp/kept/disk")
  start_nbdkit "$tmp/$mode.sock" --filter=cow file dir="$tmp/images" \
    cow-lifetime=clients:"$grace" cow-clone-separator=@ cow-on-read="$tmp/on" \
    cow-stats="$tmp/$mode.json" "${args[@]}"
  $PYTHON "$tests/clone-churn.py" "$tmp/$mode.sock" "$mode" "$seconds" "$grace" \
    "$tmp/images/golden" "$tmp/on" > "$tmp/$mode.out" ||
    fail "$mode: $(cat "$tmp/$mode.out")"
  echo "$mode: $(cat "$tmp/$mode.out")"
  ended=$(jq '.overlays.discarded + .overlays.closed' "$tmp/$mode.json")
  echo "$mode: overlays ended so far: $ended"
  [ "$ended" -gt 0 ] || fail "$mode: no overlay ended"
  if [ "$mode" = temp ]; then
    jq -e '.ended > 0 and .alive > 0' "$tmp/$mode.out" >/dev/null ||
      fail "temp: not both an ended and a living overlay met"
  fi
done
[ "$(md5sum < "$tmp/images/golden")" = "$sum" ] || fail "the golden image changed"
