#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# With cow-file=PATH every export gets its own kept file beside PATH,
# named so that no export name a client sends (slashes, dots, 4096
# bytes, non-UTF-8) can put it anywhere else; each keeps its own data
# across a restart.
. "$abs_top_srcdir/tests/functions.sh"

mkdir "$tmp/d" "$tmp/d/sub"
touch "$tmp/marker"
start_nbdkit "$tmp/sock" --filter=cow memory 1M cow-file="$tmp/d/ov"

names_py="names = ['', 'x', '../x', '/', '/etc/passwd', '.', '..', 'sub/x',
         'a/../../b', '%2e%2e', 'x' * 4096, 'caf\u00e9']
sock = '$tmp/sock'"
nbdsh -c "$BY_NAME" -c "$names_py
for i, name in enumerate(names):
    conn(sock, name).pwrite(b'%04d' % i, 0)
" || fail "writing to odd export names"
# A name that is not UTF-8: bytes 0xff 0x2f 0x2e, from a percent-encoded URI.
nbdsh -u "nbd+unix:///%FF%2F%2E?socket=$tmp/sock" -c "h.pwrite(b'9999', 0)" ||
  fail "writing to a non-UTF-8 export name"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"

# Every file made since the marker is directly in $tmp/d, named as the
# man page says.
find "$tmp" -newer "$tmp/marker" -type f ! -name 'sock*' ! -name made | sort > "$tmp/made"
grep -v "^$tmp/d/ov" "$tmp/made" && fail "files made outside the directory of cow-file"
[ -z "$(ls -A "$tmp/d/sub")" ] || fail "a file made in a subdirectory"
for want in ov ov.x ov.%2E%2E%2Fx ov.%2F ov.%2Fetc%2Fpasswd ov.%2E ov.%2E%2E \
            ov.sub%2Fx ov.a%2F%2E%2E%2F%2E%2E%2Fb ov.%252e%252e ov.caf%C3%A9 \
            ov.%FF%2F%2E; do
  [ -f "$tmp/d/$want" ] || fail "no kept file $want: $(ls "$tmp/d")"
done
ls "$tmp/d" | grep -Eq '^ov\.#[0-9a-f]{16}$' || fail "no hashed file for the 4096-byte name"
# 13 kept files and sub.
[ "$(ls "$tmp/d" | wc -l)" -eq 14 ] || fail "unexpected files: $(ls "$tmp/d")"

# After a restart every name reads its own data.
start_nbdkit "$tmp/sock" --filter=cow memory 1M cow-file="$tmp/d/ov"
nbdsh -c "$BY_NAME" -c "$names_py
for i, name in enumerate(names):
    got = conn(sock, name).pread(4, 0)
    assert got == b'%04d' % i, 'export %r reads %r' % (name[:20], got)
" || fail "kept exports lost or mixed their data"
nbdsh -u "nbd+unix:///%FF%2F%2E?socket=$tmp/sock" -c "assert h.pread(4, 0) == b'9999'" ||
  fail "the non-UTF-8 export lost its data"
