#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# SIGTERM ends nbdkit within 2 seconds after 100,000 small writes into
# 4K blocks whose throw-away overlay lives on a filesystem mounted with
# discard, where freeing a file of many extents is slowest: first on
# the filesystem of the test's own TMPDIR (where users' overlays are),
# 100-byte writes 8K apart into a base of zeros, each block zeroed
# before its bytes are written (a skip if that filesystem does not
# discard, where the bound holds anyway); then whole-block writes at
# random on ext4 mounted with discard on a loop device.
. "$abs_top_srcdir/tests/functions.sh"
instrumented && skip "a bound in seconds: the plain suite only"
command -v mkfs.ext4 >/dev/null || skip "no mkfs.ext4"

if findmnt -n -o OPTIONS -T "$tmp" | tr , '\n' | grep -qx discard; then
  start_nbdkit "$tmp/sock" --filter=cow memory 1G cow-block-size=4K
  nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "
buf = b'x' * 100
for i in range(100000):
    while h.aio_in_flight() >= 32:
        h.poll(-1)
    h.aio_pwrite(buf, i * 8192)
while h.aio_in_flight() > 0:
    h.poll(-1)
"
  took=$(exit_ms "$tmp/sock")
  echo "nbdkit exited $took ms after SIGTERM on $(findmnt -n -o FSTYPE,SOURCE -T "$tmp")"
  [ "$took" -lt 2000 ] || fail "nbdkit took $took ms to exit on TMPDIR's filesystem"
  rm -f "$tmp/sock"
else
  echo "TMPDIR's filesystem is not mounted with discard: its part skipped"
fi

truncate -s 2G "$tmp/ext4.img"
mkfs.ext4 -q -F "$tmp/ext4.img"
mkdir "$tmp/mnt"
mount -o loop,discard "$tmp/ext4.img" "$tmp/mnt" 2>/dev/null ||
  skip "cannot mount a loop device here"
on_exit "umount '$tmp/mnt'"
TMPDIR=$tmp/mnt start_nbdkit "$tmp/sock" --filter=cow memory 64G \
  cow-block-size=4K
writes=$(rounds 100000 10000)
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "
import random
r = random.Random(1)
blocks = h.get_size() // 4096
buf = b'x' * 4096
for i in range($writes):
    while h.aio_in_flight() >= 32:
        h.poll(-1)
    h.aio_pwrite(buf, r.randrange(blocks) * 4096)
while h.aio_in_flight() > 0:
    h.poll(-1)
"
took=$(exit_ms "$tmp/sock")
echo "nbdkit exited $took ms after SIGTERM, $writes writes before"
[ "$took" -lt 2000 ] || fail "nbdkit took $took ms to exit"
