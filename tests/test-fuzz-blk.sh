#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The block-layer fuzzer (tests/fuzz-blk.c): replays the seed corpus,
# then runs FUZZ_RUNS new inputs (default 3000).  Any mismatch with the
# model, sanitizer report or crash fails.  make fuzz runs it for longer.
. "$abs_top_srcdir/tests/functions.sh"

fuzzer=$abs_top_builddir/tests/fuzz-blk
[ -x "$fuzzer" ] || skip "no libFuzzer (clang) in this build"
# New inputs go to a scratch copy, never into the source tree.
cp -r "$abs_top_srcdir/tests/fuzz-corpus" "$tmp/corpus"
"$fuzzer" -runs="${FUZZ_RUNS:-3000}" -max_len=512 -print_final_stats=1 \
  "$tmp/corpus" 2>"$tmp/log" || { tail -40 "$tmp/log"; fail "fuzzer failed"; }
grep -E '^(INFO: seed corpus|#[0-9]+ +(INITED|DONE)|Done|stat::number_of_executed_units)' "$tmp/log"
