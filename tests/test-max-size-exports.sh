#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-max-size is the server's: it bounds the overlays of all exports
# together, throw-away or kept.  The writer that crosses it gets ENOSPC
# and changes nothing; every export keeps reading and overwriting what
# it holds, and a trim in one export gives space to another.  Two
# torture clients on two exports under one cap read every byte right.
. "$abs_top_srcdir/tests/functions.sh"

B=65536
blocks=$(( 8 * (B + 16) ))      # 8 blocks with their 16 bytes of map

# used SOCK: the space counted, from the next report of cow-stats of
# the server on SOCK.
used ()
{
  sleep 1.5   # the next report
  jq -e '.server.space.used' "$1.json"
}

for kind in throwaway kept; do
  sock=$tmp/sock-$kind
  extra=
  if [ "$kind" = kept ]; then
    mkdir "$tmp/kept"
    extra="cow-file=$tmp/kept/ov"
  fi
  # What the overlays of "", a and b take before any write (a kept
  # file's header and states), then room for 8 blocks more.
  start_nbdkit "$sock" --filter=cow memory 8M $extra cow-stats="$sock.json"
  nbdsh -c "
for name in ['', 'a', 'b']:
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix('$sock')
"
  overhead=$(used "$sock")
  stop_nbdkit "$(cat "$sock.pid")" "$sock.err"
  rm -f "$sock"
  cap=$(( overhead + blocks ))
  start_nbdkit "$sock" --filter=cow memory 8M cow-max-size=$cap $extra \
    cow-stats="$sock.json"
  nbdsh -c "$BY_NAME" -c "
sock = '$sock'
B = $B
def enospc(what, fn):
    try:
        fn()
    except nbd.Error as e:
        assert e.errno == 'ENOSPC', '%s: %s' % (what, e.errno)
        return
    raise AssertionError(what + ' found space past the cap')
a, b = conn(sock, 'a'), conn(sock, 'b')
# a takes blocks until the cap stops it; b then has no room at all.
n = 0
while True:
    try:
        a.pwrite(b'a' * B, n * B)
    except nbd.Error as e:
        assert e.errno == 'ENOSPC', e.errno
        break
    n += 1
assert n == 8, 'a wrote %d blocks' % n
enospc('a write to b', lambda: b.pwrite(b'b' * B, 0))
assert b.pread(B, 0) == bytes(B), 'a refused write changed b'
# Both keep reading, and a overwrites what it holds.
a.pwrite(b'A' * B, 0)
assert a.pread(B, 0) == b'A' * B
assert a.pread(B, (n - 1) * B) == b'a' * B
# A trim in a gives b room for one block, not two.
a.trim(B, (n - 1) * B)
b.pwrite(b'b' * B, 0)
enospc('a second write to b', lambda: b.pwrite(b'b' * B, B))
assert b.pread(B, 0) == b'b' * B
assert a.pread(B, 0) == b'A' * B
" || fail "$kind: cow-max-size over two exports"
  grep -q 'the overlay is full (.* all exports together)' "$sock.err" ||
    fail "$kind: no message: $(cat "$sock.err")"
  [ "$(used "$sock")" -le "$cap" ] || fail "$kind: over the cap"
  echo "$kind: one cap of $cap bytes ($overhead before any write) over all exports"
done

# Two torture clients, on two exports under one cap of 8 blocks: every
# read right in both, refusals counted, all overlays together never
# over the cap.
make_base "$tmp/tbase" $(( 16 * 1024 * 1024 ))
tcap=$(( 8 * B ))
start_nbdkit "$tmp/tsock" --filter=cow file "$tmp/tbase" cow-max-size=$tcap \
  cow-stats="$tmp/tstats.json"
for name in x y; do
  "$abs_top_builddir/tests/torture" -Q --enospc -t "${TORTURE_SECONDS:-3}" \
    -b $B "$tmp/tbase" "nbd+unix:///$name?socket=$tmp/tsock" \
    > "$tmp/torture-$name.out" &
done
for name in x y; do
  wait -n || { cat "$tmp"/torture-*.out; fail "torture under one cap"; }
done
cat "$tmp"/torture-*.out
grep -Eq ' [1-9][0-9]* refused' "$tmp"/torture-*.out || fail "the cap was never hit"
sleep 1.5   # the next report
jq -e "(.exports | length) == 2 and .server.space.used <= $tcap and
       .server.throwaway_bytes_on_disk <= $tcap and
       all(.exports[]; .overlay_bytes_on_disk <= $tcap)" "$tmp/tstats.json" \
  >/dev/null || fail "over the cap: $(cat "$tmp/tstats.json")"
