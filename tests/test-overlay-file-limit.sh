#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Where a temporary file cannot grow (here `ulimit -f`, as a
# filesystem's largest file would stop it), the write that needed more
# fails with a clear error, its block stays as it was, and nbdkit keeps
# serving the rest of the disk.
. "$abs_top_srcdir/tests/functions.sh"

instrumented && skip "valgrind and the sanitizers write files of their own"
trap '' XFSZ            # nbdkit inherits it: EFBIG rather than a signal
ulimit -f $(( 20 * 1024 ))      # KiB: 20 MiB
start_nbdkit "$tmp/sock" --filter=cow memory 1G cow-stripes=1
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c '
failed = None
for mib in range(64):
    try:
        h.pwrite(b"%-4096d" % mib, mib * 2**20)
    except nbd.Error as e:
        assert e.errno in ("EFBIG", "ENOSPC", "EIO"), e
        failed = mib
        break
assert failed is not None, "64 MiB written into a file limited to 20"
assert h.pread(4096, failed * 2**20) == bytes(4096), "failed block allocated"
for mib in range(failed):
    assert h.pread(4096, mib * 2**20) == b"%-4096d" % mib, mib
print("the write of MiB %d failed" % failed)
'
grep -q 'cannot take .* more bytes' "$tmp/sock.err" ||
  fail "no clear error in nbdkit's messages: $(cat "$tmp/sock.err")"
grep 'cannot take' "$tmp/sock.err" | head -1
