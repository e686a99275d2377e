#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-clone-separator=@: a name NAME@TAG is a clone of the plugin's
# export NAME (file dir= here), @TAG of the default export; every clone
# has an overlay of its own, and a name without the separator is served
# as before.  Hostile names stay with the plugin: a base it lacks or
# refuses makes no overlay.  Bad values of both new parameters stop
# nbdkit at start, naming them.
. "$abs_top_srcdir/tests/functions.sh"

for v in "" ab a 7 " " é; do
  expect_start_failure "cow-clone-separator=$v: must be one punctuation character" \
    --filter=cow memory 1M cow-clone-separator="$v"
done
for v in "" forever clients: clients:-1 clients:1e3 clients:0.0001 \
         clients:86401 clients:x server:1 CLIENTS; do
  expect_start_failure "cow-lifetime=$v: must be server, clients or clients:GRACE" \
    --filter=cow memory 1M cow-lifetime="$v"
done

mkdir "$tmp/images"
printf 'DISK1' > "$tmp/images/disk1"; truncate -s 1M "$tmp/images/disk1"
printf 'DISK2' > "$tmp/images/disk2"; truncate -s 2M "$tmp/images/disk2"
printf 'MAIN' > "$tmp/main"; truncate -s 1M "$tmp/main"
start_nbdkit "$tmp/dir" --filter=cow file dir="$tmp/images" \
  cow-clone-separator=@ cow-stats="$tmp/stats.json"
start_nbdkit "$tmp/one" --filter=cow file "$tmp/main" cow-clone-separator=+

nbdsh -c "$BY_NAME" -c "
dir = '$tmp/dir'
a, b, c = conn(dir, 'disk1@vm1'), conn(dir, 'disk1@vm2'), conn(dir, 'disk2@vm1')
assert a.pread(5, 0) == b'DISK1' and b.pread(5, 0) == b'DISK1'
assert c.pread(5, 0) == b'DISK2' and c.get_size() == 2 << 20
a.pwrite(b'one', 0)
b.pwrite(b'two', 0)
assert a.pread(5, 0) == b'oneK1' and b.pread(5, 0) == b'twoK1'
plain = conn(dir, 'disk1')
assert plain.pread(5, 0) == b'DISK1', 'the plain name sees a clone'
plain.pwrite(b'base', 0)
assert conn(dir, 'disk1@vm1').pread(5, 0) == b'oneK1'
for name in ['nosuch@vm1', '../images/disk1@x', 'a/b@c', '@', '@vm1', '..@x']:
    assert refused(dir, name), name + ' was served'
one = '$tmp/one'
x, y = conn(one, '+vm1'), conn(one, 'anything+vm2')
assert x.pread(4, 0) == b'MAIN' and y.pread(4, 0) == b'MAIN'
x.pwrite(b'X', 0)
assert y.pread(4, 0) == b'MAIN' and conn(one, '').pread(4, 0) == b'MAIN'
assert conn(one, '+vm1').pread(4, 0) == b'XAIN'
" || fail "clones by tag"
[ "$(head -c 5 "$tmp/images/disk1")" = DISK1 ] || fail "the base changed"
sleep 1.5
jq -e '[.exports[].name] | sort == ["disk1", "disk1@vm1", "disk1@vm2", "disk2@vm1"]' \
  "$tmp/stats.json" >/dev/null ||
  fail "overlays made: $(jq -c '[.exports[].name]' "$tmp/stats.json")"
