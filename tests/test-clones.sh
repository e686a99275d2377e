#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Clones of one golden image that end with their clients
# (cow-lifetime=clients:GRACE, cow-clone-separator=@): 100 clones
# written at once each read back their own writes and the golden
# image elsewhere, the image unchanged; cow-stats shows them alive
# with their connections; once they have left and the grace has
# passed, every overlay is discarded, the temporary files take no more
# disk space than before, and a name used before reads the pristine
# image again.
. "$abs_top_srcdir/tests/functions.sh"

clones=100
mkdir "$tmp/images"
golden=$tmp/images/golden
make_base "$golden" $((4 * 1024 * 1024))
sum=$(md5sum < "$golden")

# Two threads per connection (-t 2), not sixteen: valgrind stops at 500
# threads.
start_nbdkit "$tmp/sock" -t 2 --filter=cow file dir="$tmp/images" \
  cow-lifetime=clients:1 cow-clone-separator=@ cow-stats="$tmp/stats.json"
empty=$(overlay_bytes "$tmp/sock")

# Each clone writes its own pattern: a whole block, a partial block
# over the base's data and one over its hole, then reads everything
# back while the others write.
nbdsh -c "
import threading
golden = open('$golden', 'rb').read()
places = [(0, 65536), (1 << 20, 5000), ((3 << 20) + 123, 777)]
def pattern(i, n):
    return (b'%03d' % i * (n // 3 + 1))[:n]
handles = []
for i in range($clones):
    c = nbd.NBD()
    c.connect_uri('nbd+unix:///golden@vm%d?socket=$tmp/sock' % i)
    handles.append(c)
def clone(i):
    c = handles[i]
    for at, n in places:
        c.pwrite(pattern(i, n), at)
errors = []
def run(i):
    try:
        clone(i)
    except Exception as e:
        errors.append((i, e))
threads = [threading.Thread(target=run, args=(i,)) for i in range($clones)]
for t in threads: t.start()
for t in threads: t.join()
assert not errors, errors
for i, c in enumerate(handles):
    want = bytearray(golden)
    for at, n in places:
        want[at:at + n] = pattern(i, n)
    for at in range(0, len(golden), 1 << 20):
        assert c.pread(1 << 20, at) == want[at:at + (1 << 20)], 'clone %d at %d' % (i, at)
" -c "
import json, os, time
time.sleep(1.5)   # the next report, the clones still connected
s = json.load(open('$tmp/stats.json'))
assert s['overlays']['alive'] == $clones, s['overlays']
assert all(e['connections'] == 1 for e in s['exports']), s['exports']
pid = int(open('$tmp/sock.pid').read())
written = 0
for fd in os.listdir('/proc/%d/fd' % pid):
    path = '/proc/%d/fd/%s' % (pid, fd)
    try:                # a descriptor closed since (the report's file)
        if '/nbdkit-cow-' in os.readlink(path):
            written += os.stat(path).st_blocks * 512
    except FileNotFoundError:
        pass
print('overlay files: $empty bytes empty, %d with $clones clones' % written)
assert written >= $clones * 65536, 'the clones data is not in the overlay files'
" || fail "$clones clones written at once"
[ "$(md5sum < "$golden")" = "$sum" ] || fail "the golden image changed"

# The grace (1 s) passes, the overlays are discarded and punched
# (under valgrind, closing the connections alone takes seconds).
for _ in $(seq 600); do
  [ "$(jq '.overlays.discarded' "$tmp/stats.json")" -eq $clones ] && break
  sleep 0.2
done
jq -e ".overlays == { alive: 0, discarded: $clones, closed: 0 } and
       (.exports | length) == 0" "$tmp/stats.json" >/dev/null ||
  fail "not all discarded: $(jq -c .overlays "$tmp/stats.json")"
after=$(overlay_bytes "$tmp/sock")
echo "overlay files after the clones left: $after bytes"
[ "$after" -le "$empty" ] || fail "the overlay files keep $after bytes, $empty before"

nbdsh -u "nbd+unix:///golden@vm7?socket=$tmp/sock" -c "
assert h.pread(h.get_size(), 0) == open('$golden', 'rb').read(), 'not pristine'
" || fail "a clone name used before does not read the pristine image"
