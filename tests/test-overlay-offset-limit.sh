#!/usr/bin/env bash
# Where the overlay's filesystem cannot hold an offset (ext4 stops at
# 16 TiB), that request fails with a clear error and nbdkit keeps
# serving the rest of the disk.
. "$abs_top_srcdir/tests/functions.sh"

[ "$(stat -f -c %T "$tmp")" = ext2/ext3 ] || skip "$tmp is not on ext4"
start_nbdkit "$tmp/sock" --filter=cow memory 1P
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c '
try:
    h.pwrite(b"x" * 4096, 20 * 2**40)
    raise AssertionError("a write at 20 TiB succeeded on ext4")
except nbd.Error as e:
    assert e.errno in ("ENOSPC", "EFBIG", "EINVAL", "EIO"), e
h.pwrite(b"y" * 4096, 2**20)
assert h.pread(4096, 2**20) == b"y" * 4096
assert h.pread(4096, 20 * 2**40) == bytes(4096), "failed block marked allocated"
'
grep -q 'cannot hold this offset' "$tmp/sock.err" ||
  fail "no clear error in nbdkit's messages: $(cat "$tmp/sock.err")"
grep 'cannot hold' "$tmp/sock.err"
