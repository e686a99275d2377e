#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The README's pipeline over a read-only source: an xz-compressed image
# made writable, modified in place by qemu-io, copied out by nbdcopy
# over 4 connections; the output is the image with the change.
. "$abs_top_srcdir/tests/functions.sh"
requires_filter xz

command -v xz >/dev/null || skip "xz is not installed"
head -c $(( 4 * 1024 * 1024 )) /dev/urandom > "$tmp/disk.img"
xz -k --block-size=1MiB "$tmp/disk.img"
"$NBDKIT" -U - --filter=cow --filter=xz file "$tmp/disk.img.xz" \
  --run 'qemu-io -f raw -c "write -P 0x55 4096 1M" "$uri" >/dev/null &&
         nbdcopy --connections=4 "$uri" "'"$tmp/out.img"'"'
printf '\125%.0s' $(seq 1048576) |
  dd of="$tmp/disk.img" bs=4096 seek=1 conv=notrunc status=none
cmp "$tmp/out.img" "$tmp/disk.img" || fail "pipeline output differs"
