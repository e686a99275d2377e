#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Each export of a plugin gets its own overlay: writes through one
# export never show in another, survive reconnecting to their own,
# and are shared by concurrent connections to the same export.  Export
# names are client input, so odd ones (slashes, dots, 4096 bytes) must
# work like any other.
. "$abs_top_srcdir/tests/functions.sh"

# The file plugin serves each file of a directory as an export.
mkdir "$tmp/dir"
head -c 1M /dev/zero | tr '\0' a > "$tmp/dir/a"
head -c 1M /dev/zero | tr '\0' b > "$tmp/dir/b"
sums=$(md5sum "$tmp/dir"/*)
start_nbdkit "$tmp/sock" --filter=cow file dir="$tmp/dir"
uri="nbd+unix:///%s?socket=$tmp/sock"
nbdsh -c "
a1 = nbd.NBD(); a1.connect_uri('$(printf "$uri" a)')
b = nbd.NBD(); b.connect_uri('$(printf "$uri" b)')
a1.pwrite(b'written to a', 4096)
assert b.pread(12, 4096) == b'b' * 12, 'a write to a shows in b'
b.pwrite(b'written to b', 8192)
assert a1.pread(12, 8192) == b'a' * 12, 'a write to b shows in a'
a2 = nbd.NBD(); a2.connect_uri('$(printf "$uri" a)')
assert a2.pread(12, 4096) == b'written to a', 'second connection to a'
a1.shutdown(); a2.shutdown()
a3 = nbd.NBD(); a3.connect_uri('$(printf "$uri" a)')
assert a3.pread(12, 4096) == b'written to a', 'reconnecting to a'
" || fail "exports of the file plugin share data"
[ "$(md5sum "$tmp/dir"/*)" = "$sums" ] || fail "a base file changed"

# The memory plugin accepts any export name.  Each name writes its own
# tag at the same offset; every name must read back its own tag.
start_nbdkit "$tmp/msock" --filter=cow memory 1M
nbdsh -c "$BY_NAME" -c "
sock = '$tmp/msock'
names = ['', 'x', '../x', '/', '/etc/passwd', '.', '..', 'a/../../b',
         '%2e%2e', 'x' * 4096, 'caf\u00e9']
for i, name in enumerate(names):
    conn(sock, name).pwrite(b'%04d' % i, 0)
for i, name in enumerate(names):
    got = conn(sock, name).pread(4, 0)
    assert got == b'%04d' % i, 'export %r reads %r' % (name[:20], got)
" || fail "exports of the memory plugin share data"
