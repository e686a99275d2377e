#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-file=PATH promises PATH.NAME for every export name, hashed when
# too long: a PATH whose file name leaves no room for those is refused
# at start, naming the limit; the longest that fits serves named
# exports, a long name's file hashed.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 1M "$tmp/base"
longest=$(printf 'k%.0s' $(seq 237))

expect_start_failure "cow-file=.*: too long .*at most 237 bytes" \
  --filter=cow file "$tmp/base" cow-file="$tmp/${longest}k"

long_name=$(printf 'n%.0s' $(seq 300))
export long_name
"$NBDKIT" -U - --filter=cow file "$tmp/base" cow-file="$tmp/$longest" --run '
  nbdsh -u "nbd+unix:///vm1?socket=$unixsocket" \
    -c "h.pwrite(b\"one\", 0); h.flush()" &&
  nbdsh -u "nbd+unix:///$long_name?socket=$unixsocket" \
    -c "h.pwrite(b\"two\", 0); h.flush()"' 2>"$tmp/err" ||
  fail "named exports under the longest PATH: $(cat "$tmp/err")"
[ -f "$tmp/$longest.vm1" ] || fail "no file for vm1"
ls "$tmp/$longest".\#* >/dev/null || fail "no hashed file for the long name"
