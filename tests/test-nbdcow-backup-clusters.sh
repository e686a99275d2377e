#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# An increment of nbdcow backup holds only the 64K clusters that
# changed since PREV, whatever cow-block-size: at 64K, 128K, 256K and
# 1M blocks (where the server marks whole blocks changed), 4K written
# after a full backup into a block the overlay holds whole give an
# increment of one data cluster, and a cluster zeroed is a zero
# cluster; each backup restores exactly.  Then a third backup, after
# the zeroed cluster is written again as it was before: the increment
# holds it (PREV's chain reads it as zeros, not as the full backup's
# data below), and restores exactly.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 8 * M ))
cd "$tmp"
# data_bytes FILE: the bytes FILE itself holds as data.
data_bytes ()
{
  qemu-img map --output=json "$1" |
    jq '[.[] | select(.depth == 0 and .data) | .length] | add // 0'
}
for bs in 64K 128K 256K 1M; do
  rm -f sock ctl ./*.qcow2 b1.raw
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-block-size=$bs \
    cow-control="$tmp/ctl" cow-view-separator=@ cow-changes-separator=+
  uri="nbd+unix:///?socket=$tmp/sock"
  # Blocks the overlay holds whole, which a later write marks changed.
  nbdsh -u "$uri" -c "import os; h.pwrite(os.urandom(2 * $M), 0)"
  "$NBDCOW" backup "$tmp/ctl" "$uri" b1 full.qcow2 >/dev/null
  nbdcopy "$uri" b1.raw
  nbdsh -u "$uri" -c "
h.pwrite(b'x' * 4096, $M + 8192)
h.zero(65536, 7 * $M)
"
  "$NBDCOW" backup --base=full.qcow2 "$tmp/ctl" "$uri" b2 inc.qcow2 >/dev/null
  got=$(data_bytes inc.qcow2)
  echo "cow-block-size=$bs: the increment holds $got bytes of data"
  [ "$got" -eq 65536 ] ||
    fail "cow-block-size=$bs: the increment holds $got bytes of data, not 65536"
  [ "$(qemu-img map --output=json inc.qcow2 |
       jq -c "[.[] | select(.depth == 0 and .zero) | .start]")" = \
    "[$(( 7 * M ))]" ] || fail "cow-block-size=$bs: the zeroed cluster"
  qemu-img compare -q full.qcow2 b1.raw ||
    fail "cow-block-size=$bs: the full backup differs from the disk at b1"
  qemu-img compare -q inc.qcow2 "$uri" ||
    fail "cow-block-size=$bs: the increment differs from the disk at b2"
  nbdsh -u "$uri" -c "
base = open('b1.raw', 'rb')
base.seek(7 * $M)
h.pwrite(base.read(65536), 7 * $M)
h.pwrite(b'y' * 4096, 7 * $M + 65536)
"
  "$NBDCOW" backup --base=inc.qcow2 "$tmp/ctl" "$uri" b3 inc2.qcow2 >/dev/null
  qemu-img compare -q inc2.qcow2 "$uri" ||
    fail "cow-block-size=$bs: the third backup differs from the disk at b3"
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
done
