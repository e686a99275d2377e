#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The man pages are sound POD, without podchecker's warnings (an empty
# section, a link to nowhere).
. "$abs_top_srcdir/tests/functions.sh"
command -v podchecker >/dev/null || skip "no podchecker"

for pod in "$abs_top_srcdir/docs/nbdkit-cow-filter.pod" \
           "$abs_top_srcdir/tools/nbdcow/nbdcow.pod"; do
  podchecker -warnings "$pod" >"$tmp/out" 2>&1 ||
    { cat "$tmp/out" >&2; fail "podchecker: $pod"; }
  ! grep -q WARNING "$tmp/out" || { cat "$tmp/out" >&2; fail "podchecker warns: $pod"; }
done
