#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A power loss at any moment of nbdcow backup prune leaves the old
# chain or the new one: the power cut at each of its persistence points
# in turn (tests/prune-power.py), what was not synced lost, kept, the
# names kept without the bytes, or every name change kept but one;
# after each, the backups kept restore as before, the newest verifies,
# and prune run again finishes.  Pruned to two of four, and in the
# plain suite also to the newest alone (which then takes its own name
# again); instrumented, cut at the syncs and name changes alone.  Planted, each failed it: the folder not synced after the
# new full backup took its name (only every name change kept but one
# caught it), the backup's header not synced before.
. "$abs_top_srcdir/tests/functions.sh"

shim=$abs_top_builddir/tests/.libs/power-dir.so
[ -f "$shim" ] || fail "no $shim"
uri="nbd+unix:///?socket=$tmp/sock"
make_base "$tmp/base" $(( 2 * 1024 * 1024 + 4096 ))
serve_views cow-file="$tmp/ov.cow"
mkdir "$tmp/b"
for d in 1 2 3 4; do
  nbdsh -u "$uri" -c "h.pwrite(b'$d' * 2 * 65536, $d * 65536 + 4096)"
  backup_day "$d"
done
only=()
! instrumented || only=(--durable-only)
for keep in $(rounds '2 1' 2); do
  mkdir "$tmp/work$keep"
  PYTHONPATH=$tests COW_SANITIZER_PRELOAD=${sanitizer_preload:-} \
    "$PYTHON" "$tests/prune-power.py" "$NBDCOW" "$shim" "$tmp/b" \
    "$tmp/work$keep" "$keep" "${only[@]}" 4.qcow2 3.qcow2 2.qcow2 1.qcow2 ||
    fail "prune --keep=$keep: a power cut left a chain wrong (above)"
done
