#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A write, zero or trim with FUA to a kept overlay is durable once it
# completes, as a flush after it would make it: after kill -9 the
# restarted overlay reads it, in blocks new to the overlay and in
# blocks it held.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 8 * M ))
ov=$tmp/ov.cow
uri="nbd+unix:///?socket=$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "
h.pwrite(b'o' * 65536, 3 * $M)
h.flush()
h.pwrite(b'a' * 65536, $M, nbd.CMD_FLAG_FUA)
h.pwrite(b'b' * 4096, 2 * $M + 8192, nbd.CMD_FLAG_FUA)
h.pwrite(b'c' * 4096, 3 * $M, nbd.CMD_FLAG_FUA)
h.zero(65536, 4 * $M, nbd.CMD_FLAG_FUA)
h.trim(65536, 5 * $M, nbd.CMD_FLAG_FUA)
"
kill -9 "$(cat "$tmp/sock.pid")"
for _ in $(seq 100); do [ -e "/proc/$(cat "$tmp/sock.pid")" ] || break; sleep 0.1; done
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "
base = open('$tmp/base', 'rb').read()
assert h.pread(65536, $M) == b'a' * 65536, 'a FUA write of a new block is lost'
want = base[2 * $M:2 * $M + 8192] + b'b' * 4096
assert h.pread(12288, 2 * $M) == want, 'a FUA write into a new block is lost'
assert h.pread(4096, 3 * $M) == b'c' * 4096, 'a FUA rewrite is lost'
assert h.pread(65536, 4 * $M) == bytes(65536), 'a FUA zero is lost'
assert h.pread(65536, 5 * $M) == bytes(65536), 'a FUA trim is lost'
" || fail "a write with FUA did not survive kill -9"
