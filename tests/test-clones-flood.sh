#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# 10,000 clones used once each, one after another, with
# cow-lifetime=clients and cow-max-exports=8, nbdkit at ulimit -n 1024:
# every clone is served, starting as the golden image (the bound counts
# the overlays alive), and nbdkit's descriptors, resident memory and
# the disk space of its overlay files stay flat.  Then the bound refuses a new name only while it is full:
# with seven clones connected (the eighth place is the default
# export's) a new one is refused, and served once one has left and its
# grace has passed.
. "$abs_top_srcdir/tests/functions.sh"

clones=$(rounds 10000 100)
mkdir "$tmp/images"
make_base "$tmp/images/golden" $((4 * 1024 * 1024))

ulimit -n 1024     # nbdkit's, and the clients'
start_nbdkit "$tmp/sock" --filter=cow file dir="$tmp/images" \
  cow-lifetime=clients cow-clone-separator=@ cow-max-exports=8
$PYTHON "$tests/clone-flood.py" "$tmp/sock" "$tmp/sock.pid" "$clones" 10 \
  > "$tmp/flood.json" || fail "the flood failed"
jq -c . "$tmp/flood.json"
jq -e ".served == $clones and .refused == 0" "$tmp/flood.json" >/dev/null ||
  fail "not every clone was served"
# Flat: the descriptors of the last sample no more than the first's
# (give or take a connection's closing), the overlay files holding no
# more than a few clones' blocks (each writes three 64K blocks), and
# resident memory grown by less than 512 KiB over the second half (the
# overlays' maps alone would be more than 100 bytes a clone).  Memory
# only in the plain suite: ASan and valgrind hold freed memory back on
# purpose (ASan's quarantine keeps up to 256 MiB), and find leaks
# themselves.
jq -e '.samples as $s | ($s | length) == 10 and
       ([$s[].fds] | max) <= $s[0].fds + 4 and
       ([$s[].overlay_kib] | max) <= 8 * 192' "$tmp/flood.json" >/dev/null ||
  fail "descriptors or disk space grew with the clones"
if ! instrumented; then
  jq -e '.samples as $s | $s[9].rss_kib - $s[4].rss_kib < 512' \
    "$tmp/flood.json" >/dev/null || fail "memory grew with the clones"
fi

nbdsh -c "$BY_NAME" -c "
sock = '$tmp/sock'
held = [conn(sock, 'golden@held%d' % i) for i in range(7)]
assert refused(sock, 'golden@late'), 'an eighth overlay was made'
held.pop().shutdown()
import time
for _ in range(100):
    if not refused(sock, 'golden@late'):
        break
    time.sleep(0.1)
else:
    raise AssertionError('refused with a place free')
" || fail "cow-max-exports with cow-lifetime=clients"
