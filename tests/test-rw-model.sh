#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Random reads, writes, zeroes, trims and caches with aligned and
# unaligned heads and tails, checked against a model, for block sizes
# 4K to 4M over disks whose size is not a multiple of the block size.
# The base file must be unchanged afterwards.
. "$abs_top_srcdir/tests/functions.sh"

run ()
{
  block_size=$1 size=$2 seed=$3
  make_base "$tmp/base" "$size"
  sum=$(md5sum < "$tmp/base")
  "$NBDKIT" -U - --filter=cow file "$tmp/base" cow-block-size="$block_size" \
    --run "$PYTHON '$tests/rw-model.py' \"\$uri\" '$tmp/base' $block_size $seed 600"
  [ "$(md5sum < "$tmp/base")" = "$sum" ] || fail "base file changed"
}

run 4096     $(( 1024 * 1024 + 1234 )) 1
run 65536    $(( 3 * 1024 * 1024 + 511 )) 2
run 65536    $(( 2 * 65536 )) 3
run 1048576  $(( 5 * 1024 * 1024 + 7 )) 4
run 4194304  $(( 9 * 1024 * 1024 + 4097 )) 5
run 4194304  1000 6
