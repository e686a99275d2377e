#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Fault injection under the torture client.  Base reads fail at 1%, 10%
# and 50% (nbdkit's error filter below ours, with cow-on-read and
# unaligned writes so that copy-ups and read-modify-writes hit them);
# overlay writes fail with EIO (tests/overlay-faults.c); the overlay's
# filesystem fills up.  Every request must succeed with correct data or
# fail with an error, nbdkit must neither crash nor hang (the torture
# client's connections would fail), and once faults stop the whole disk
# must read as the model says.
. "$abs_top_srcdir/tests/functions.sh"

seconds=${TORTURE_SECONDS:-2}
make_base "$tmp/base" $(( 16 * 1024 * 1024 + 777 ))
torture="'$abs_top_builddir/tests/torture' -Q -t $seconds --faults '$tmp/faults' '$tmp/base' \"\$uri\""

for rate in 1 10 50; do
  echo "== base reads failing at $rate%"
  touch "$tmp/faults"
  "$NBDKIT" -U - --filter=cow --filter=error file "$tmp/base" \
    cow-on-read=true cow-on-cache=true \
    error-pread=EIO error-pread-rate="$rate%" error-pread-file="$tmp/faults" \
    --run "$torture" || fail "torture with base faults at $rate%"
done

echo "== overlay writes failing with EIO at 10%"
touch "$tmp/faults"
shim=$abs_top_builddir/tests/.libs/overlay-faults.so
[ -f "$shim" ] || fail "no $shim"
NBDKIT_PRELOAD="$shim" COW_FAULT_FILE="$tmp/faults" COW_FAULT_RATE=10 \
  "$NBDKIT" -U - --filter=cow file "$tmp/base" cow-on-read=true \
  --run "$torture" || fail "torture with overlay faults"

echo "== the overlay's filesystem fills up"
mkdir "$tmp/small"
mount -t tmpfs -o size=1m tmpfs "$tmp/small" 2>/dev/null ||
  skip "cannot mount a small tmpfs here"
on_exit "umount '$tmp/small'"
touch "$tmp/faults"
TMPDIR=$tmp/small "$NBDKIT" -U - --filter=cow file "$tmp/base" \
  --run "$torture" > "$tmp/full.out" || fail "torture with a full overlay"
cat "$tmp/full.out"
grep -q ' [1-9][0-9]* failed,' "$tmp/full.out" || fail "the overlay never filled"
