#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Checkpoints made while four connections write at random: each write
# lies wholly before or after each checkpoint, as the model of which
# write completed when says (tests/checkpoint-race.py).
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 16M "$tmp/base"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-block-size=4096 \
  cow-changes-separator=+ cow-control="$tmp/ctl"
pick_seed
"$PYTHON" "$tests/checkpoint-race.py" "$tmp/sock" "$tmp/ctl" "$NBDCOW" \
  "$(rounds 6 3)" "$seed"
