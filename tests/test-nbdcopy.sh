#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcopy --connections=4 through the filter reproduces, byte for byte,
# the base with scattered writes applied.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 64 * 1024 * 1024 + 4096 ))
cp --sparse=always "$tmp/base" "$tmp/expected"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base"
uri="nbd+unix:///?socket=$tmp/sock"
"$PYTHON" "$tests/scatter-writes.py" "$uri" "$tmp/expected" 1 300
nbdcopy --connections=4 "$uri" "$tmp/out"
cmp "$tmp/out" "$tmp/expected" || fail "nbdcopy output differs"
