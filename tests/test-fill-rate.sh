#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-fill-rate caps the bytes the fill reads from the plugin a second:
# 8 MiB of data in a 256 MiB disk of holes at cow-fill-rate=4M take
# about two seconds to fill, not the minute the whole disk would at
# that rate, nor less than the data over the rate.  The statistics'
# bytes_per_second is that rate, this run's, and stays as it was once
# the fill has ended; a kept overlay filled before reads nothing after
# a restart, at 0 bytes a second.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
truncate -s $(( 256 * M )) "$tmp/base"
for at in 0 252; do
  head -c $(( 4 * M )) /dev/urandom |
    dd of="$tmp/base" bs=$M seek=$at conv=notrunc 2>/dev/null
done
stats=$tmp/stats.json
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-fill=true \
  cow-fill-rate=4M cow-stats="$stats"
start=$(date +%s%N)
nbdinfo --size "nbd+unix:///?socket=$tmp/sock" >/dev/null
fill_state_is "$stats" complete
ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "filled 8 MiB of data at 4M a second in $ms ms"
[ "$ms" -ge 1500 ] || fail "the fill went faster than cow-fill-rate"
[ "$ms" -le 30000 ] || fail "the fill paced the holes too"
jq -e '.exports[0].base_reads.bytes == 8388608' "$stats" >/dev/null ||
  fail "the fill read more than the data: $(jq -c '.exports[0].base_reads' "$stats")"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rate=$(jq '.exports[0].fill.bytes_per_second' "$stats")
echo "bytes_per_second: $rate"
[ "$rate" -gt $(( 2 * M )) ] && [ "$rate" -le $(( 5 * M )) ] ||
  fail "bytes_per_second $rate is not the rate read at cow-fill-rate=4M"
sleep 1.5
[ "$(jq '.exports[0].fill.bytes_per_second' "$stats")" -eq "$rate" ] ||
  fail "bytes_per_second moved after the end: $(jq -c '.exports[0].fill' "$stats")"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# A kept overlay, filled, then filled again after a restart.
for run in 1 2; do
  rm -f "$tmp/sock"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-fill=true \
    cow-fill-rate=64M cow-file="$tmp/o.cow" cow-stats="$stats"
  nbdinfo --size "nbd+unix:///?socket=$tmp/sock" >/dev/null
  fill_state_is "$stats" complete
  rate=$(jq '.exports[0].fill.bytes_per_second' "$stats")
  echo "run $run: bytes_per_second $rate"
  if [ "$run" = 2 ]; then
    [ "$rate" -eq 0 ] || fail "a restart that read nothing shows $rate bytes a second"
  fi
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
done
