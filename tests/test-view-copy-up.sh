#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# From the first view on, a copy-up of a block held in part in several
# runs (cow-on-read) writes each run of units it lacks and nothing
# else: the block then reads as the base with the writes on it, in the
# export and in a view made before.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
ctl=$tmp/ctl
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-on-read=true \
  cow-view-separator=@ cow-control="$ctl"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" \
  -c 'h.pwrite(b"a" * 4096, 4096); h.pwrite(b"b" * 4096, 12288)'
"$NBDCOW" view create "$ctl" "" v1 >/dev/null
check='
base = bytearray(open("'"$tmp/base"'", "rb").read(65536))
base[4096:8192] = b"a" * 4096
base[12288:16384] = b"b" * 4096
assert h.pread(65536, 0) == bytes(base), "the block reads wrong"
'
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "$check" ||
  fail "the export's block after its copy-up"
nbdsh -u "nbd+unix:///@v1?socket=$tmp/sock" -c "$check" ||
  fail "the view's block after the copy-up"
