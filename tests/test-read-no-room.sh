#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A read never fails because the overlay has no room: a copy into it
# made on the way (cow-on-read, the fill's reads) that finds the space
# cap's share of copies spent, or the overlay's filesystem full, is
# given up and the read served from the plugin, with the right data.
# Copies leave an eighth of cow-max-size to writes, which still fail
# with ENOSPC once they need more.
. "$abs_top_srcdir/tests/functions.sh"

# read_all SOCK: reads the whole 16 MiB pattern disk in 64K requests,
# each checked.
read_all ()
{
  nbdsh -u "nbd+unix:///?socket=$1" -c '
import struct
def pattern(offset, count):
    return struct.pack(">%dQ" % (count // 8), *range(offset, offset + count, 8))
failed = 0
for off in range(0, 16 << 20, 65536):
    try:
        assert h.pread(65536, off) == pattern(off, 65536), "wrong data at %d" % off
    except nbd.Error as e:
        failed += 1
assert failed == 0, "%d of 256 reads failed" % failed
'
}

# The cap under cow-on-read: the reads copy up to 7 MiB, then read the
# plugin; writes take the eighth left, then fail with ENOSPC.
start_nbdkit "$tmp/cap.sock" --filter=cow pattern 16M cow-max-size=8M \
  cow-on-read=true cow-stats="$tmp/cap.json"
read_all "$tmp/cap.sock"
read_all "$tmp/cap.sock"
nbdsh -u "nbd+unix:///?socket=$tmp/cap.sock" -c '
h.pwrite(b"w" * 65536, (16 << 20) - 65536)
assert h.pread(65536, (16 << 20) - 65536) == b"w" * 65536
refused = False
for off in range(0, 16 << 20, 65536):
    try:
        h.pwrite(b"x" * 65536, off)
    except nbd.Error as e:
        assert e.errno == "ENOSPC", e
        refused = True
        break
assert refused, "writes past cow-max-size were taken"
'

# The fill stops short of the cap; the clients' reads are served.
start_nbdkit "$tmp/fill.sock" --filter=cow pattern 16M cow-max-size=8M \
  cow-fill=true cow-stats="$tmp/fill.json"
read_all "$tmp/fill.sock"
for _ in $(seq 300); do
  state=$(jq -r '.exports[0].fill.state' "$tmp/fill.json" 2>/dev/null || true)
  case $state in failed|paused|complete) break ;; esac
  sleep 0.2
done
read_all "$tmp/fill.sock"

# A full filesystem under the throw-away and the kept overlay.
mkdir "$tmp/small"
mount -t tmpfs -o size=2m tmpfs "$tmp/small" 2>/dev/null ||
  skip "cannot mount a small tmpfs here"
on_exit "umount '$tmp/small'"
TMPDIR=$tmp/small start_nbdkit "$tmp/full.sock" --filter=cow pattern 16M \
  cow-on-read=true
read_all "$tmp/full.sock"
read_all "$tmp/full.sock"
stop_nbdkit "$(cat "$tmp/full.sock.pid")" "$tmp/full.sock.err"
start_nbdkit "$tmp/kept.sock" --filter=cow pattern 16M \
  cow-on-read=true cow-file="$tmp/small/o.cow"
read_all "$tmp/kept.sock"
read_all "$tmp/kept.sock"
