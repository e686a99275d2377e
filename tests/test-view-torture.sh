#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Point-in-time views made and deleted at random moments while four
# connections write, zero and trim: each reads as the disk was at its
# instant, and its changes since the view before are the blocks written
# between them (tests/view-torture.py).
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 16 * 1024 * 1024 ))
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
  cow-view-separator=@ cow-changes-separator=+ cow-control="$tmp/ctl"
"$PYTHON" "$tests/view-torture.py" "$tmp/sock" "$tmp/ctl" "$NBDCOW" \
  "$tmp/base" "$(rounds 12 4)" "${SEED:-$RANDOM}"
