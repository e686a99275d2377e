#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# kill -9 at random moments, requests in flight and flushes now and
# then: after every restart nothing flushed is lost and nothing never
# written appears (tests/kept-crash.py has the model).
. "$abs_top_srcdir/tests/functions.sh"

# One 1 MiB chunk for each of the 8 write locks (cow-stripes=8).
make_base "$tmp/base" $((8 * 1024 * 1024))
default_rounds=$(rounds 30 10)
/usr/bin/python3 "$abs_top_srcdir/tests/kept-crash.py" "$NBDKIT" \
  "$tmp/base" "$tmp/ov" "$tmp/sock" "${KEPT_CRASH_ROUNDS:-$default_rounds}" "$RANDOM" ||
  fail "see above"
