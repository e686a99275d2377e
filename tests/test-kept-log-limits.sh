#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The log's limits (docs/overlay-format.md, "The log"): a flush of 255
# or 256 blocks writes one record, which a load after kill -9 keeps;
# one of 257 writes the pages instead.  Each block reads back after
# the kill, and nbdcow reads the file as nbdkit does.
. "$abs_top_srcdir/tests/functions.sh"

ov=$tmp/ov
uri="nbd+unix:///?socket=$tmp/sock"
B=65536
truncate -s $(( 300 * B )) "$tmp/base"
for n in 255 256 257; do
  rm -f "$ov" "$tmp/sock"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
  nbdsh -u "$uri" -c "
for b in range($n):
    h.pwrite(b'%08d' % b * 8192, b * $B)
h.flush()"
  pid=$(cat "$tmp/sock.pid")
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  records=$("$NBDCOW" info --json "$ov" | jq .log.records)
  want=$(( n > 256 ? 0 : 1 ))
  [ "$records" = "$want" ] ||
    fail "$n blocks flushed: $records records in the log, not $want"
  held=$("$NBDCOW" map --json "$ov" |
         jq '[.[] | select(.state == "overlay") | .length] | add')
  [ "$held" = $(( n * B )) ] ||
    fail "$n blocks flushed, then kill -9: nbdcow maps $held bytes"
  rm -f "$tmp/sock"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
  nbdsh -u "$uri" -c "
for b in range($n):
    assert h.pread($B, b * $B) == b'%08d' % b * 8192, 'block %d lost' % b"
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
  echo "$n blocks in one flush: $records records, every block back after kill -9"
done
