#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Every crash point of every operation that changes a kept overlay
# (tests/crash-points.py): open and recovery, flushes of each kind,
# checkpoints made and deleted, a view made, read and deleted,
# nbdcow check --repair; the power cut at each persistence point in
# turn, what was not synced lost, kept, torn, or all kept but one.
# After each cut the file opens with every flushed byte, nothing never
# written, marks missing no change, and checks sound.  Plainly every
# point one of the first three ways, turning with the point, and each
# of the three writes before the last lost alone;
# COW_CRASH_POINTS_EVERY=1 (the release check) every point every way.
# Instrumented, the scenarios of recovery, repair and a flush of
# records only, the first three ways.
. "$abs_top_srcdir/tests/functions.sh"

shim=$abs_top_builddir/tests/.libs/power-log.so
[ -f "$shim" ] || fail "no $shim"
args=()
[ "${COW_CRASH_POINTS_EVERY:-}" != 1 ] || args+=(--every)
! instrumented || args+=(--three-ways recovery repair flush-records)
PYTHONPATH=$abs_top_srcdir/tests COW_SANITIZER_PRELOAD=${sanitizer_preload:-} \
  "$PYTHON" "$tests/crash-points.py" \
  "$NBDKIT" "$NBDCOW" "$shim" "$tmp" "${args[@]}" ||
  fail "a crash point left a file refused or wrong: see above"
