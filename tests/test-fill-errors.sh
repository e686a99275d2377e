#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The fill over a source that fails for a while (nbdkit's error filter,
# failing reads while a file exists): with cow-fill-retries=3 it tries
# again, says so in the log and the statistics, and completes once the
# source is back; with cow-fill-retries=0 it stops, failed with the
# error.  Clients meanwhile see only their own requests' errors: their
# writes and reads of the overlay succeed.  cow-max-size stops the fill
# short of the limit, leaving room for a client's write, and a full
# filesystem stops it.
. "$abs_top_srcdir/tests/functions.sh"
requires_filter error

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 8 * M ))
uri="nbd+unix:///?socket=$tmp/sock"
stats=$tmp/stats.json
serve ()
{
  rm -f "$tmp/sock"
  start_nbdkit "$tmp/sock" --filter=cow --filter=error file "$tmp/base" \
    error=EIO error-pread-rate=100% error-file="$tmp/failing" \
    cow-fill=true cow-stats="$stats" "$@"
}
# client_checks: a write of a whole block and its read succeed while
# the source fails, a read of the source fails with the client's own
# error.
client_checks ()
{
  nbdsh -u "$uri" -c "
import errno
h.pwrite(b'x' * 65536, 65536)
assert h.pread(65536, 65536) == b'x' * 65536
try:
    h.pread(4096, 7 * $M)
    assert False, 'a read of the failing source succeeded'
except nbd.Error as e:
    assert e.errnum == errno.EIO, e
" || fail "a client was not served as it should be"
}

# Retries outlast the failure: the fill completes.
touch "$tmp/failing"
serve cow-fill-retries=3
client_checks
fill_retrying "$stats" 1 30
grep -q 'cow-fill: export "": reading .*Input/output error: trying again in 1 s (1 of 3)' \
  "$tmp/sock.err" || fail "the retry is not in the log: $(cat "$tmp/sock.err")"
rm "$tmp/failing"
fill_state_is "$stats" complete
jq -e '.exports[0].fill.error == null' "$stats" >/dev/null ||
  fail "an error left after the source came back: $(jq -c '.exports[0].fill' "$stats")"
nbdsh -u "$uri" -c "
want = bytearray(open('$tmp/base', 'rb').read())
want[65536:131072] = b'x' * 65536
assert h.pread(len(want), 0) == want, 'the disk reads wrong'
"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# A second outage gets its tries again: a request that succeeded after
# a retry leaves none counted against the next failure.  The log says
# a retry at once (the statistics may be a second late, as late as the
# retry itself).
tries_said () { grep -c 'trying again in' "$tmp/sock.err" || true; }
outage ()
{
  touch "$tmp/failing"
  for _ in $(seq 100); do
    [ "$(tries_said)" -ge "$1" ] && break
    jq -e '.exports[0].fill.state == "failed"' "$stats" >/dev/null 2>&1 && break
    sleep 0.05
  done
  rm "$tmp/failing"
  [ "$(tries_said)" -ge "$1" ] ||
    fail "outage $1 was not tried again: $(jq -c '.exports[0].fill' "$stats")"
}
serve cow-fill-retries=1 cow-fill-requests=1 cow-fill-rate=512K
nbdinfo --size "$uri" >/dev/null
outage 1
# The retry succeeds a second later; the fill goes on past it.
filled=$(jq -r '.exports[0].fill.filled_bytes // 0' "$stats" 2>/dev/null || echo 0)
for _ in $(seq 100); do
  [ "$(jq -r '.exports[0].fill.filled_bytes' "$stats" 2>/dev/null)" -gt "$filled" ] 2>/dev/null &&
    break
  sleep 0.1
done
sleep 1.5
outage 2
sleep 2.5
jq -e '.exports[0].fill.state == "running" or .exports[0].fill.state == "complete"' \
  "$stats" >/dev/null || fail "the second outage stopped the fill: $(jq -c '.exports[0].fill' "$stats")"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# No retries: the fill stops with the error, the clients go on.
touch "$tmp/failing"
serve cow-fill-retries=0
client_checks
fill_state_is "$stats" failed
jq -e '.exports[0].fill.error == "Input/output error"' "$stats" >/dev/null ||
  fail "no error: $(jq -c '.exports[0].fill' "$stats")"
grep -q 'cow-fill: export "": stopped with 0 bytes filled: Input/output error' \
  "$tmp/sock.err" || fail "the stop is not in the log: $(cat "$tmp/sock.err")"
rm "$tmp/failing"
nbdsh -u "$uri" -c "assert h.pread(4096, 7 * $M) == open('$tmp/base', 'rb').read()[7 * $M:7 * $M + 4096]" ||
  fail "a client's read of the source failed after the fill stopped"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
echo "the fill tried again or stopped as told; the clients were served"

# cow-max-size: the fill stops short of it, a client's write still fits.
make_base "$tmp/base" $(( 32 * M ))
serve cow-max-size=16M
nbdinfo --size "$uri" >/dev/null
fill_state_is "$stats" failed
jq -e '.exports[0].fill.error == "No space left on device" and
       .server.space.used <= 15728640' "$stats" >/dev/null ||
  fail "cow-max-size: $(jq -c '[.exports[0].fill, .server]' "$stats")"
grep -q 'cow-max-size=16M leaves the rest to the clients' "$tmp/sock.err" ||
  fail "not said: $(cat "$tmp/sock.err")"
nbdsh -u "$uri" -c "h.pwrite(b'y' * $M, 30 * $M)" -c "assert h.pread($M, 30 * $M) == b'y' * $M" ||
  fail "the fill took the room of a client's write"
jq -e '.server.space.refused_requests == 0' "$stats" >/dev/null ||
  fail "a request was refused: $(jq -c .server "$stats")"
echo "cow-max-size stopped the fill, not the client"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# A full filesystem (a 4 MiB tmpfs for $TMPDIR) stops the fill; the
# server goes on, and a client's write over a block the fill copied
# takes no new space and succeeds.  One request in flight copies from
# the start of the disk on, so the first block is among those copied;
# with several, which ones the filesystem took depends on timing.
mkdir "$tmp/small"
if ! mount -t tmpfs -o size=4m tmpfs "$tmp/small" 2>/dev/null; then
  echo "the full filesystem not tried: cannot mount a small tmpfs here"
  exit 0
fi
on_exit "umount '$tmp/small'"
TMPDIR=$tmp/small serve cow-fill-requests=1
nbdinfo --size "$uri" >/dev/null
fill_state_is "$stats" failed
jq -e '.exports[0].fill.error == "No space left on device"' "$stats" \
  >/dev/null || fail "full filesystem: $(jq -c '.exports[0].fill' "$stats")"
nbdsh -u "$uri" -c "h.pwrite(b'z' * 65536, 0)" \
  -c "assert h.pread(65536, 0) == b'z' * 65536" ||
  fail "a client's write failed on the full filesystem"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
echo "a full filesystem stopped the fill, not the server"
