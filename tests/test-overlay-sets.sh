#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The throw-away overlays of all exports share one set of files, one
# per stripe, however large their disks: here on ext2 with 1K blocks,
# whose files stop at about 16 GiB, three exports of 10 GiB write and
# read back the first and last bytes of their disks in two files.
. "$abs_top_srcdir/tests/functions.sh"

command -v mkfs.ext2 >/dev/null || skip "no mkfs.ext2"
truncate -s 64M "$tmp/fs.img"
mkfs.ext2 -q -F -b 1024 "$tmp/fs.img"
mkdir "$tmp/fs"
mount -o loop "$tmp/fs.img" "$tmp/fs" 2>/dev/null ||
  skip "cannot mount a loop device here"
on_exit "umount '$tmp/fs'"

TMPDIR=$tmp/fs start_nbdkit "$tmp/sock" --filter=cow memory 10G cow-stripes=2
files () { overlay_fds "$tmp/sock" | wc -l; }
[ "$(files)" -eq 2 ] || fail "$(files) files at start, not 2"

nbdsh -c "$BY_NAME" -c "
sock = '$tmp/sock'
size = 10 * 2**30
for name in ['', 'a', 'b']:
    h = conn(sock, name)
    h.pwrite(b'first of %-5s' % name.encode(), 0)
    h.pwrite(b'last of %-6s' % name.encode(), size - 14)
for name in ['', 'a', 'b']:
    h = conn(sock, name)
    assert h.pread(14, 0) == b'first of %-5s' % name.encode(), name
    assert h.pread(14, size - 14) == b'last of %-6s' % name.encode(), name
" || fail "exports over several sets of files"
[ "$(files)" -eq 2 ] || fail "$(files) files for three exports, not 2"
echo "three exports of 10 GiB on ext2: $(files) files"
