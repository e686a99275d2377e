#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-max-exports=N: at most N overlays, one of them kept for the
# default export.  A new name past that is refused at the handshake
# (ENOENT, as for an export that does not exist), logged once naming
# the parameter and counted by cow-stats; the default export and the
# names opened before keep their data and go on being served.  An
# NBD_OPT_INFO opens an export too, and takes a place.  A bad N stops
# nbdkit at start.
. "$abs_top_srcdir/tests/functions.sh"

for v in 0 -1 abc 1.5 1000001 ""; do
  expect_start_failure "cow-max-exports=$v: must be a number from 1 to 1000000" \
    --filter=cow memory 1M cow-max-exports="$v"
done

start_nbdkit "$tmp/sock" --filter=cow memory 1M cow-max-exports=3 \
  cow-stats="$tmp/stats.json"
nbdsh -c "$BY_NAME" -c "
sock = '$tmp/sock'
for name in ['', 'a', 'b']:
    conn(sock, name).pwrite(b'tag of %-10s' % name.encode(), 4096)
assert refused(sock, 'c'), 'a fourth overlay was made'
assert refused(sock, 'd'), 'a fifth overlay was made'
for name in ['', 'a', 'b']:
    h = conn(sock, name)
    assert h.pread(17, 4096) == b'tag of %-10s' % name.encode(), name
    h.pwrite(b'again', 0)
" || fail "cow-max-exports=3"
[ "$(grep -c 'cow-max-exports=3: a new export name is refused' "$tmp/sock.err")" -eq 1 ] ||
  fail "the refusal is not logged once: $(cat "$tmp/sock.err")"
sleep 1.5   # the next report
jq -e '.refused_export_names == 2 and (.exports | length) == 3' \
  "$tmp/stats.json" >/dev/null || fail "cow-stats: $(cat "$tmp/stats.json")"

# NBD_OPT_INFO opens the export: a name asked about takes a place.
start_nbdkit "$tmp/info" --filter=cow memory 1M cow-max-exports=2
[ "$(nbdinfo --size "nbd+unix:///i?socket=$tmp/info")" = 1048576 ] ||
  fail "nbdinfo --size of a first name"
if nbdinfo --size "nbd+unix:///j?socket=$tmp/info" 2>/dev/null; then
  fail "cow-max-exports=2 served a second name"
fi
[ "$(nbdinfo --size "nbd+unix:///i?socket=$tmp/info")" = 1048576 ] &&
  [ "$(nbdinfo --size "nbd+unix:///?socket=$tmp/info")" = 1048576 ] ||
  fail "the name asked about, or the default export, refused"

# 1 serves the default export only.
start_nbdkit "$tmp/one" --filter=cow memory 1M cow-max-exports=1
nbdsh -u "nbd+unix:///?socket=$tmp/one" -c "h.pwrite(b'x', 0)" ||
  fail "cow-max-exports=1 refuses the default export"
if nbdinfo --size "nbd+unix:///a?socket=$tmp/one" 2>"$tmp/err"; then
  fail "cow-max-exports=1 serves a named export"
fi
echo "refused: $(cat "$tmp/err")"
