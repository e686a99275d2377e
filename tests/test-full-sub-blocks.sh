#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A write into a block held in part that fails for want of room on the
# overlay's filesystem (ENOSPC) changes nothing a read sees: the
# sectors the overlay held keep their data, the others read from the
# plugin.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 16 * 1024 * 1024 ))
mkdir "$tmp/small"
mount -t tmpfs -o size=1m tmpfs "$tmp/small" 2>/dev/null ||
  skip "cannot mount a small tmpfs here"
on_exit "umount '$tmp/small'"
TMPDIR=$tmp/small start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "
import sys
base = open('$tmp/base', 'rb').read(65536)
h.pwrite(b'a' * 4096, 0)               # block 0 holds its first sector
# Fill the filesystem: whole blocks, then sectors of fresh blocks.
full = False
for size in (65536, 4096):
    for b in range(1, 256):
        try:
            h.pwrite(b'f' * size, b * 65536)
        except nbd.Error as e:
            assert e.errno == 'ENOSPC', e
            full = True
            break
if not full:
    sys.exit('the filesystem did not fill')
try:
    h.pwrite(b'b' * 8192, 0)            # the held sector and a new one
    sys.exit('a write needing room on a full filesystem succeeded')
except nbd.Error as e:
    assert e.errno == 'ENOSPC', e
got = h.pread(8192, 0)
if got[:4096] != b'a' * 4096:
    sys.exit('the failed write changed the sector the overlay held')
if got[4096:] != base[4096:8192]:
    sys.exit('the failed write changed a sector read from the plugin')
" || fail "see above"
