#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A full overlay filesystem gives the client ENOSPC (or EIO), nbdkit
# keeps serving, earlier data stays intact and the failed blocks are
# not marked allocated: they still read as the base, and a refused
# write that spans blocks in the overlay changes none of their bytes,
# throw-away or kept.  Blocks already in the overlay keep taking
# writes and zeros: their space is held.
. "$abs_top_srcdir/tests/functions.sh"

mkdir "$tmp/small"
mount -t tmpfs -o size=1m tmpfs "$tmp/small" 2>/dev/null ||
  skip "cannot mount a small tmpfs here"
on_exit "umount '$tmp/small'"

# refused_spanning(AT, HELD): a write of 1 MiB at AT, past the first
# HELD bytes of "a" the overlay holds, is refused for space and leaves
# them as they were.
refused_spanning='
def refused_spanning(at, held):
    try:
        h.pwrite(b"x" * 1048576, at)
        assert False, "a write into new blocks of a full filesystem succeeded"
    except nbd.Error as e:
        assert e.errno in ("ENOSPC", "EIO"), e
    assert h.pread(held, 0) == b"a" * held, "a refused write changed held blocks"
'

# The pattern plugin's data says where it came from, unlike zeros.
TMPDIR=$tmp/small start_nbdkit "$tmp/sock" --filter=cow pattern 100M \
  cow-stats="$tmp/stats.json"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c '
h.pwrite(b"a" * 524288, 0)
failed = 0
for i in range(1, 8):
    try:
        h.pwrite(b"b" * 1048576, i * 4 * 1048576)
    except nbd.Error as e:
        assert e.errno in ("ENOSPC", "EIO"), e
        failed = i
        break
assert failed, "the overlay never filled"

def pattern(offset, count):
    start = offset - offset % 8
    words = b"".join((start + 8 * k).to_bytes(8, "big")
                     for k in range((offset + count - start + 7) // 8))
    return words[offset - start:offset - start + count]

assert h.pread(524288, 0) == b"a" * 524288, "earlier data lost"
# Into blocks the overlay holds and new ones: refused, and it changed
# none of the bytes it could.
' -c "$refused_spanning" -c '
refused_spanning(262144, 524288)
off = failed * 4 * 1048576
assert h.pread(1048576, off) == pattern(off, 1048576), "failed write left state"
h.pwrite(b"c" * 4096, 4096)
h.zero(4096, 8192, nbd.CMD_FLAG_NO_HOLE)
assert h.pread(16384, 0) == b"a" * 4096 + b"c" * 4096 + bytes(4096) + b"a" * 4096
h.pread(4096, 90 * 1048576)      # still serving
'

# A client can fill the filesystem again and again: the refusal is
# logged once, and cow-stats counts every one.
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c '
refused = 0
for i in range(40, 60):
    try:
        h.pwrite(b"d" * 1048576, i * 1048576)
    except nbd.Error:
        refused += 1
assert refused >= 10, refused
'
[ "$(grep -c "filesystem is full" "$tmp/sock.err")" -eq 1 ] ||
  fail "refusals for a full filesystem logged $(grep -c "filesystem is full" "$tmp/sock.err") times"
for _ in $(seq 50); do
  jq -e '.server.space.filesystem_refused_requests >= 11' \
    "$tmp/stats.json" >/dev/null 2>&1 && break
  sleep 0.1
done
jq -e '.server.space.filesystem_refused_requests >= 11' "$tmp/stats.json" \
  >/dev/null || fail "cow-stats did not count: $(cat "$tmp/stats.json")"

# A kept overlay on a full filesystem: a refused write spanning held
# blocks leaves them as they were.
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
mkdir "$tmp/small2"
mount -t tmpfs -o size=2m tmpfs "$tmp/small2" || fail "no second tmpfs"
on_exit "umount '$tmp/small2'"
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow pattern 100M cow-file="$tmp/small2/ov.cow"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c '
h.pwrite(b"a" * 131072, 0)
h.flush()
' -c "import subprocess; subprocess.run(['dd', 'if=/dev/zero', 'of=$tmp/small2/fill', 'bs=64k'], stderr=subprocess.DEVNULL)" -c "$refused_spanning" -c '
refused_spanning(65536, 131072)
h.flush()
' || fail "a kept overlay on a full filesystem"
