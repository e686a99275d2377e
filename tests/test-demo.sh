#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The README's quick-start demo runs and says it worked.
. "$abs_top_srcdir/tests/functions.sh"

"$tests/demo.sh" > "$tmp/out"
cat "$tmp/out"
grep -q 'after:  Hello from the client, written through the cow filter' "$tmp/out" ||
  fail "the client did not see its write"
grep -q 'Demo OK' "$tmp/out" || fail "demo did not finish"
