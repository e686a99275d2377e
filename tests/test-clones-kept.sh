#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Kept clones (cow-file=PATH, cow-lifetime=clients:GRACE): once a
# clone's clients have left and its grace has passed, its file is
# flushed, marked closed cleanly and closed (no descriptor left, no
# flush asked by the client); its next client opens it again with its
# data, and so does a new nbdkit after a restart.  cow-stats counts the
# overlays closed.
. "$abs_top_srcdir/tests/functions.sh"

mkdir "$tmp/images" "$tmp/kept"
make_base "$tmp/images/golden" $((2 * 1024 * 1024))
kept=$tmp/kept/disk
serve () {
  start_nbdkit "$tmp/$1" --filter=cow file dir="$tmp/images" \
    cow-file="$kept" cow-lifetime=clients:0.5 cow-clone-separator=@ \
    cow-stats="$tmp/$1.json"
}
kept_fds () {
  for fd in /proc/"$(cat "$tmp/$1.pid")"/fd/*; do
    case "$(readlink "$fd" || true)" in "$tmp/kept/"*) echo "$fd" ;; esac
  done
}
# wait_closed SERVER N: until cow-stats counts N overlays closed.
wait_closed () {
  for _ in $(seq 150); do
    [ "$(jq '.overlays.closed' "$tmp/$1.json")" -ge "$2" ] && return 0
    sleep 0.2
  done
  fail "$1: $(jq -c .overlays "$tmp/$1.json"), not $2 closed"
}
WRITE='
def tag(i):
    return b"kept clone %d " % i * 100
def write(sock, i):
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///golden@vm%d?socket=%s" % (i, sock))
    h.pwrite(tag(i), 70000)
def check(sock, i):
    h = nbd.NBD()
    h.connect_uri("nbd+unix:///golden@vm%d?socket=%s" % (i, sock))
    assert h.pread(len(tag(i)), 70000) == tag(i), "clone %d lost its data" % i
    return h
'

serve one
nbdsh -c "$WRITE" -c "
for i in range(5):
    write('$tmp/one', i)
" || fail "writing the clones"
# The five clones and the default export's overlay, made at start.
wait_closed one 6
[ -z "$(kept_fds one)" ] || fail "closed overlays keep descriptors: $(kept_fds one)"
for i in 0 1 2 3 4; do
  f=$(ls "$kept".golden*vm$i)
  jq -e '.closed_cleanly == true' <("$NBDCOW" info --json "$f") >/dev/null ||
    fail "$f not closed cleanly: $("$NBDCOW" info --json "$f")"
done

# The next client of a name opens its file again, with its data; while
# it is connected, the file is open.
nbdsh -c "$WRITE" -c "
h = check('$tmp/one', 3)
import subprocess
fds = subprocess.check_output(['ls', '-l', '/proc/%s/fd' % open('$tmp/one.pid').read().strip()])
assert b'vm3' in fds, 'the reopened overlay has no descriptor'
" || fail "a closed clone reopened"
wait_closed one 7

# A new nbdkit: each clone its own data.
stop_nbdkit "$(cat "$tmp/one.pid")" "$tmp/one.err"
serve two
nbdsh -c "$WRITE" -c "
for i in range(5):
    check('$tmp/two', i)
" || fail "the clones after a restart"
