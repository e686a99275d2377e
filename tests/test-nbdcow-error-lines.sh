#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow's worker threads failing together print their errors as whole
# lines, each "nbdcow: ..." on its own: a commit over 4 connections to
# a target whose every write fails.
. "$abs_top_srcdir/tests/functions.sh"
. "$tests/nbdcow-setup.sh"

start_nbdkit "$tmp/tsock" --filter=error memory $((128 * B)) \
  error-pwrite=EIO error-pwrite-rate=100% error-zero=EIO error-zero-rate=100%
for round in 1 2 3 4 5; do
  if "$NBDCOW" commit --connections=4 "$ov" "nbd+unix:///?socket=$tmp/tsock" \
       2>"$tmp/err"; then
    fail "commit into a failing target succeeded"
  fi
  lines=$(wc -l < "$tmp/err")
  [ "$lines" -ge 1 ] || fail "no error printed"
  if grep -v '^nbdcow: [^ ]*: [a-z ]* of [0-9]* bytes at [0-9]*: ' "$tmp/err" ||
     grep 'nbdcow:.*nbdcow:' "$tmp/err"; then
    fail "round $round: a line is not one whole error"
  fi
done
echo "errors of 4 workers, $lines whole lines: $(head -1 "$tmp/err")"
