#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-base-handles=1 with the rest of the filter: a kept overlay read
# with cow-on-read over a stack with block-size limits (the shared
# handle keeps them: every read the filter sends fits), its data there
# after a restart; cow-on-cache copies up through the shared handle;
# cow-max-exports refuses a new name and makes nothing for it, and a
# name the plugin refuses makes no overlay either.
. "$abs_top_srcdir/tests/functions.sh"

"$PYTHON" -c "
import sys
sys.stdout.buffer.write(b''.join(b'%015d\n' % i for i in range(1 << 16)))
" > "$tmp/base"
stack=(--filter=cow --filter=blocksize-policy file "$tmp/base"
       blocksize-minimum=512 blocksize-preferred=64K blocksize-maximum=64K
       blocksize-error-policy=error cow-base-handles=1)

start_nbdkit "$tmp/sock" "${stack[@]}" cow-file="$tmp/k.cow" \
  cow-on-read=true cow-stats="$tmp/stats.json"
uri="nbd+unix:///?socket=$tmp/sock"
nbdsh -u "$uri" -c 'h.pwrite(b"kept" * 1024, 102400)'
nbdcopy --connections=4 --threads=4 "$uri" "$tmp/out"
"$PYTHON" - "$tmp/base" "$tmp/out" <<'PY' || fail "the copy through cow-on-read"
import sys
want = bytearray(open(sys.argv[1], "rb").read())
want[102400:106496] = b"kept" * 1024
assert open(sys.argv[2], "rb").read() == want
PY
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
[ "$(jq '.exports[0].plugin_opens' "$tmp/stats.json")" = 1 ] ||
  fail "cow-file: $(jq '.exports[0].plugin_opens' "$tmp/stats.json") opens"
[ "$(jq '.exports[0].copy_ups.cow_on_read' "$tmp/stats.json")" -gt 0 ] ||
  fail "cow-on-read copied nothing up"

start_nbdkit "$tmp/sock2" "${stack[@]}" cow-file="$tmp/k.cow"
nbdsh -u "nbd+unix:///?socket=$tmp/sock2" \
  -c 'assert h.pread(4096, 102400) == b"kept" * 1024' ||
  fail "the kept overlay after a restart"

start_nbdkit "$tmp/sock3" "${stack[@]}" cow-on-cache=true \
  cow-stats="$tmp/stats3.json"
nbdsh -u "nbd+unix:///?socket=$tmp/sock3" -c 'h.cache(1 << 20, 0)'
stop_nbdkit "$(cat "$tmp/sock3.pid")" "$tmp/sock3.err"
[ "$(jq '.exports[0].copy_ups.cow_on_cache' "$tmp/stats3.json")" -gt 0 ] ||
  fail "cow-on-cache copied nothing up"

# A bounded server of exports, each a file of a directory.
mkdir "$tmp/dir"
cp "$tmp/base" "$tmp/dir/a"
cp "$tmp/base" "$tmp/dir/b"
start_nbdkit "$tmp/sock4" --filter=cow --filter=log file dir="$tmp/dir" \
  logfile="$tmp/log4" cow-base-handles=1 cow-max-exports=2
nbdsh -c "$BY_NAME" -c "
sock = '$tmp/sock4'
conn(sock, 'a').pwrite(b'A', 0)
assert refused(sock, 'nosuchfile'), 'a name the plugin has not'
assert refused(sock, 'b'), 'a name past cow-max-exports'
assert conn(sock, 'a').pread(1, 0) == b'A'
" || fail "names refused with cow-base-handles"
grep -q 'cow-max-exports=2: a new export name is refused' "$tmp/sock4.err" ||
  fail "no refusal logged"
