#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-file=PATH keeps the overlay across restarts: writes, zeroes,
# trims and cow-on-read copies all survive a clean stop (no flush from
# the client) and, once flushed, a kill -9; the base is never written.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $((4 * 1024 * 1024))
sum=$(md5sum < "$tmp/base")
uri="nbd+unix:///?socket=$tmp/sock"

# 1. Written, then a clean stop: no flush.
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/ov"
nbdsh -u "$uri" -c "
h.pwrite(b'unaligned write', 12345)
h.pwrite(b'x' * 65536, 3 * 65536)
h.zero(2 * 65536, 20 * 65536)
h.trim(65536, 40 * 65536)
" || fail "writing through the kept overlay"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"
[ -s "$tmp/ov" ] || fail "no overlay file at cow-file"

check_kept ()
{
  nbdsh -u "$uri" -c "
assert h.pread(15, 12345) == b'unaligned write', 'write lost'
assert h.pread(65536, 3 * 65536) == b'x' * 65536, 'whole block lost'
assert h.pread(2 * 65536, 20 * 65536) == bytes(2 * 65536), 'zero lost'
assert h.pread(65536, 40 * 65536) == bytes(65536), 'trim lost'
" || fail "$1"
}
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/ov"
check_kept "restart after a clean stop"
expect_extent "$uri" $((20 * 65536)) "hole,zero"

# 2. cow-on-read copies, flushed, then kill -9.  The base then changes
# behind nbdkit's back: the copied range must still read as before.
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/ov" \
  cow-on-read=true
nbdsh -u "$uri" -c "
import hashlib
open('$tmp/copied', 'w').write(hashlib.md5(h.pread(65536, 50 * 65536)).hexdigest())
h.pwrite(b'flushed', 60 * 65536 + 7)
h.flush()
"
kill -9 "$(cat "$tmp/sock.pid")"
rm -f "$tmp/sock"
cp "$tmp/base" "$tmp/base.orig"
head -c 65536 /dev/urandom | dd of="$tmp/base" bs=65536 seek=50 conv=notrunc 2>/dev/null
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/ov"
check_kept "restart after kill -9"
nbdsh -u "$uri" -c "
import hashlib
assert h.pread(7, 60 * 65536 + 7) == b'flushed', 'flushed write lost'
assert hashlib.md5(h.pread(65536, 50 * 65536)).hexdigest() == open('$tmp/copied').read(), 'cow-on-read copy lost'
" || fail "kept copies"
cp "$tmp/base.orig" "$tmp/base"
[ "$(md5sum < "$tmp/base")" = "$sum" ] || fail "the base changed"
