#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# qemu-img convert reads through the filter the same image the clients
# wrote.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 32 * 1024 * 1024 ))
cp --sparse=always "$tmp/base" "$tmp/expected"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-block-size=4K
uri="nbd+unix:///?socket=$tmp/sock"
"$PYTHON" "$tests/scatter-writes.py" "$uri" "$tmp/expected" 2 200
qemu-img convert -f raw "$uri" -O raw "$tmp/out"
cmp "$tmp/out" "$tmp/expected" || fail "qemu-img convert output differs"
qemu-img convert -f raw "$uri" -O qcow2 "$tmp/out.qcow2"
qemu-img compare -f qcow2 -F raw "$tmp/out.qcow2" "$tmp/expected" ||
  fail "qcow2 conversion differs"
