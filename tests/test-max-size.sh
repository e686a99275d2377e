#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-max-size=SIZE keeps the overlay's disk space at or below SIZE:
# requests that need more fail with ENOSPC and change nothing, nbdkit
# logs it once, the connection, other clients and the data written stay
# intact, and zeroes and trims give space back; for throw-away and kept
# overlays, cow-stats shows the cap and its use, and the torture client
# running into the cap finds every read right.
. "$abs_top_srcdir/tests/functions.sh"

expect_start_failure "cow-max-size=lots: not a size" \
  --filter=cow memory 1M cow-max-size=lots
expect_start_failure "cow-max-size=1K: less than one block \(cow-block-size=65536\)" \
  --filter=cow memory 1M cow-max-size=1K

B=65536
cap=$((1024 * 1024))
make_base "$tmp/base" $((64 * B))
uri="nbd+unix:///?socket=$tmp/sock"

# fill_and_free: writes blocks until refused, checks the refusal changed
# nothing and everything else still works, then frees space by zeroing
# and trimming, and writes again.
fill_and_free ()
{
  nbdsh -u "$uri" -c "
import errno
B = $B
written = []
for b in range(64):
    try:
        h.pwrite(bytes([b + 1]) * B, b * B)
        written.append(b)
    except nbd.Error as e:
        assert e.errno == 'ENOSPC', e.errno
        full = b
        break
else:
    raise AssertionError('never refused')
assert len(written) >= 10, written
before = h.pread(3 * B, full * B)
for n in range(20):
    # Refused again, partial or whole, and nothing changes.
    for count, off in [(B, full * B), (100, full * B + 7), (3 * B, full * B)]:
        try:
            h.pwrite(b'x' * count, off)
            raise AssertionError('a write past the cap succeeded')
        except nbd.Error as e:
            assert e.errno == 'ENOSPC', e.errno
    try:
        h.zero(B + 100, full * B - 50, nbd.CMD_FLAG_NO_HOLE)
        raise AssertionError('a zero past the cap succeeded')
    except nbd.Error as e:
        assert e.errno == 'ENOSPC', e.errno
assert h.pread(3 * B, full * B) == before, 'a refused request changed data'
# Writes into blocks already in the overlay need no space.
h.pwrite(b'again', 5)
for b in written:
    want = bytes([b + 1]) * B
    if b == 0:
        want = want[:5] + b'again' + want[10:]
    assert h.pread(B, b * B) == want, 'block %d' % b
# Another client works too.
h2 = nbd.NBD()
h2.connect_uri('$uri')
assert h2.pread(5, 5) == b'again'
h2.shutdown()
# Zeroes and trims give space back; then writes succeed again.
h.trim(2 * B, 0)
h.zero(2 * B, 2 * B)
h.zero(B + 3000, 4 * B - 1000)   # unaligned ends in blocks in the overlay
for b in (full, full + 1, full + 2):
    h.pwrite(b'y' * B, b * B)
assert h.pread(B, full * B) == b'y' * B
h.flush()
"
}

# Throw-away.
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-max-size=$cap \
  cow-stats="$tmp/stats.json"
fill_and_free || fail "throw-away overlay under the cap"
[ "$(grep -c 'the overlay is full' "$tmp/sock.err")" -eq 1 ] ||
  fail "the refusals were not logged exactly once: $(cat "$tmp/sock.err")"
sleep 1.5
jq -e ".server.space.max == $cap and .server.space.used <= $cap and
       .server.space.used > 0 and
       .server.space.refused_requests >= 80 and
       .server.throwaway_bytes_on_disk <= $cap and
       .exports[0].overlay_bytes_on_disk <= $cap" "$tmp/stats.json" >/dev/null ||
  fail "statistics: $(jq '.server, .exports[0]' "$tmp/stats.json")"
[ "$(overlay_bytes "$tmp/sock")" -le $cap ] || fail "overlay over the cap"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"

# Kept: the file stays under the cap, and a restart counts what it holds.
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-max-size=$cap \
  cow-file="$tmp/ov"
fill_and_free || fail "kept overlay under the cap"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"
[ $(( $(stat -c %b "$tmp/ov") * 512 )) -le $cap ] || fail "kept file over the cap"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-max-size=$cap \
  cow-file="$tmp/ov"
nbdsh -u "$uri" -c "
try:
    for b in range(64):
        h.pwrite(b'z' * $B, b * $B)
    raise AssertionError('the restarted overlay forgot its use')
except nbd.Error as e:
    assert e.errno == 'ENOSPC', e.errno
"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
[ $(( $(stat -c %b "$tmp/ov") * 512 )) -le $cap ] || fail "kept file over the cap"

# The torture client running into the cap: every read right, refusals
# counted, the overlay never over the cap.  The cap is 8 blocks, which
# the client's hot window passes within a few hundred requests, so
# that it is hit even where a sanitizer slows the client down.
make_base "$tmp/tbase" $(( 16 * 1024 * 1024 ))
for bs in 4096 65536; do
  tcap=$(( 8 * bs ))
  "$NBDKIT" -U - --filter=cow file "$tmp/tbase" cow-block-size=$bs \
    cow-max-size=$tcap cow-on-cache=true cow-stats="$tmp/tstats.json" \
    --run "'$abs_top_builddir/tests/torture' -Q --enospc -t ${TORTURE_SECONDS:-3} \
           -b $bs '$tmp/tbase' \"\$uri\"" > "$tmp/torture.out" ||
    { cat "$tmp/torture.out"; fail "torture under the cap, block size $bs"; }
  cat "$tmp/torture.out"
  grep -Eq ' [1-9][0-9]* refused' "$tmp/torture.out" || fail "the cap was never hit"
  jq -e ".server.space.used <= $tcap and
         .server.throwaway_bytes_on_disk <= $tcap and
         .exports[0].overlay_bytes_on_disk <= $tcap" "$tmp/tstats.json" \
    >/dev/null || fail "over the cap: $(jq '.server, .exports[0]' "$tmp/tstats.json")"
done
