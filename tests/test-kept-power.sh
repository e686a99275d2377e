#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Power loss at random moments, requests in flight and flushes now and
# then: the overlay is replaced after each kill by what a disk may hold
# (tests/power-log.c logs nbdkit's calls on it, tests/kept-crash.py
# builds the image), and after every restart nothing flushed is lost
# and nothing never written appears.  A fixed seed first, which catches
# a skipped sync of the state pages in each of four tries (the plain
# suite's rounds), then a random one, which finds what it did not, with
# the background fill copying the base in beside the writes; then
# rounds whose flushes change no state, only make data durable; then
# rounds with point-in-time views made, read and deleted at random
# moments, after which nbdcow check finds the file sound; then rounds
# whose flushes mostly take new space, the power cut inside their one
# sync (format version 7: a record of the log with its data).
. "$abs_top_srcdir/tests/functions.sh"

shim=$abs_top_builddir/tests/.libs/power-log.so
[ -f "$shim" ] || fail "no $shim"
# Big enough that copy-ups of blocks never written before go on for
# every round (they are what the order of data and states protects).
make_base "$tmp/base" $((64 * 1024 * 1024))
default_rounds=$(rounds 30 10)
pick_seed
for s in 2 "$seed"; do
  rm -f "$tmp"/ov*
  echo "seed $s"
  [ "$s" = 2 ] || export KEPT_CRASH_PARAMS="cow-fill=true cow-fill-rate=32M"
  /usr/bin/python3 "$abs_top_srcdir/tests/kept-crash.py" "$NBDKIT" \
    "$tmp/base" "$tmp/ov" "$tmp/sock" "${KEPT_CRASH_ROUNDS:-$default_rounds}" \
    "$s" "$shim" || fail "seed $s: see above"
done

# Flushes that change no state (writes into blocks the overlay holds
# whole): each still makes its data durable.
unset KEPT_CRASH_PARAMS
rm -f "$tmp"/ov*
make_base "$tmp/base" $((8 * 1024 * 1024))
KEPT_CRASH_DATA_ONLY=1 /usr/bin/python3 "$abs_top_srcdir/tests/kept-crash.py" \
  "$NBDKIT" "$tmp/base" "$tmp/ov" "$tmp/sock" "$(rounds 8 4)" 5 "$shim" ||
  fail "data-only flushes: see above"

# Views made, read and deleted among the requests.
rm -f "$tmp"/ov*
KEPT_CRASH_VIEWS=1 /usr/bin/python3 "$abs_top_srcdir/tests/kept-crash.py" \
  "$NBDKIT" "$tmp/base" "$tmp/ov" "$tmp/sock" "$(rounds 15 6)" "$(( seed + 1 ))" \
  "$shim" || fail "with views: see above"
"$NBDCOW" check "$tmp/ov" >"$tmp/check" 2>&1 ||
  fail "with views: $(cat "$tmp/check")"

# Flushes that mostly take new space, the power cut at one sync in 8:
# inside the one sync of a record of the log and its data, with writes
# into what the last record checks.  Keeping a record whose data was
# not durable, and not confirming a record before such a write, each
# failed this with seeds 3, 4 and 5.
make_base "$tmp/base" $((64 * 1024 * 1024))
for s in 3 "$(( seed + 2 ))"; do
  rm -f "$tmp"/ov*
  KEPT_CRASH_FRESH=1 KEPT_CRASH_CUT=8 /usr/bin/python3 \
    "$abs_top_srcdir/tests/kept-crash.py" "$NBDKIT" "$tmp/base" "$tmp/ov" \
    "$tmp/sock" "$(rounds 20 6)" "$s" "$shim" ||
    fail "flushes into new space, seed $s: see above"
done
