#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# kill -9 at random moments, requests in flight and flushes now and
# then: after every restart nothing flushed is lost and nothing never
# written appears (tests/kept-crash.py has the model).  Then the same
# with point-in-time views made, read and deleted at random moments,
# after which nbdcow check finds the file sound; then with flushes that
# mostly take new space (format version 7: a record of the log each)
# and writes into what the last record checks, which must be confirmed
# first (not confirming it failed this with seeds 3 and 4).
. "$abs_top_srcdir/tests/functions.sh"

# One 1 MiB chunk for each of the 8 write locks (cow-stripes=8).
make_base "$tmp/base" $((8 * 1024 * 1024))
default_rounds=$(rounds 30 10)
pick_seed
/usr/bin/python3 "$abs_top_srcdir/tests/kept-crash.py" "$NBDKIT" \
  "$tmp/base" "$tmp/ov" "$tmp/sock" "${KEPT_CRASH_ROUNDS:-$default_rounds}" "$seed" ||
  fail "see above"

rm -f "$tmp"/ov*
KEPT_CRASH_VIEWS=1 /usr/bin/python3 "$abs_top_srcdir/tests/kept-crash.py" \
  "$NBDKIT" "$tmp/base" "$tmp/ov" "$tmp/sock" "$(rounds 15 6)" "$(( seed + 1 ))" ||
  fail "with views: see above"
"$NBDCOW" check "$tmp/ov" >"$tmp/check" 2>&1 ||
  fail "with views: $(cat "$tmp/check")"

# Flushes into new space, and writes into what the last record checks.
rm -f "$tmp"/ov*
make_base "$tmp/base" $((64 * 1024 * 1024))
KEPT_CRASH_FRESH=1 /usr/bin/python3 "$abs_top_srcdir/tests/kept-crash.py" \
  "$NBDKIT" "$tmp/base" "$tmp/ov" "$tmp/sock" "$(rounds 20 6)" "$(( seed + 2 ))" ||
  fail "flushes into new space: see above"
