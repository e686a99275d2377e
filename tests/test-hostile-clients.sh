#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Hostile and careless clients: 64 connections at once that hang up
# with requests in flight (the torture client, whose model also proves
# no connection's data is corrupted by another's), raw connections that
# pipeline reads and close their socket at once, then requests at the
# last byte, past the end and of zero length with libnbd's client-side
# checks off.  nbdkit must keep serving, a bystander's data must stay
# intact, and nothing may crash (leaks: make check-asan / valgrind).
#
# The server runs hangup_threads (functions.sh): nbdkit before 1.33.10
# aborts, with no filter at all, when a client hangs up with requests
# in flight.
. "$abs_top_srcdir/tests/functions.sh"

seconds=${TORTURE_SECONDS:-2}
make_base "$tmp/base" $(( 16 * 1024 * 1024 + 777 ))
# shellcheck disable=SC2046
start_nbdkit "$tmp/sock" $(hangup_threads) --filter=cow file "$tmp/base" \
  cow-block-size=4K cow-on-read=true
uri="nbd+unix:///?socket=$tmp/sock"

echo "== 64 connections, hanging up with requests in flight"
"$abs_top_builddir/tests/torture" -Q -b 4096 -c 64 -q 8 -t "$seconds" \
  --disconnect-every 20 "$tmp/base" "$uri" ||
  fail "torture client failed with hang-ups"

echo "== raw connections pipelining reads, hanging up at once"
$PYTHON "$tests/raw-hangups.py" "$tmp/sock" "$(rounds 300 50)" 64 ||
  fail "the server stopped answering: $(tail -3 "$tmp/sock.err")"

echo "== requests at the last byte, past the end, of zero length"
nbdsh -u "$uri" -c '
size = h.get_size()
bystander = b"B" * 100000
h.pwrite(bystander, 5000000)

h.set_strict_mode(0)             # let libnbd send what the server must refuse
def must_fail(what, fn):
    try:
        fn()
    except nbd.Error as e:
        print("refused:", what, e.errno)
        return
    raise AssertionError(what + " accepted")

def may_fail(what, fn):
    try:
        fn()
        print("accepted:", what)
    except nbd.Error as e:
        print("refused:", what, e.errno)

h.pwrite(b"L", size - 1)
assert h.pread(1, size - 1) == b"L"
h.zero(1, size - 1)
h.trim(1, size - 1)
h.cache(1, size - 1)
for what, fn in [
        ("read past the end", lambda: h.pread(2, size - 1)),
        ("write past the end", lambda: h.pwrite(b"xx", size - 1)),
        ("zero past the end", lambda: h.zero(4096, size)),
        ("trim past the end", lambda: h.trim(4096, size + 4096)),
        ("cache past the end", lambda: h.cache(4096, size)),
        ("read far past the end", lambda: h.pread(512, 2**62))]:
    must_fail(what, fn)
for what, fn in [
        ("zero-length read", lambda: h.pread(0, 100)),
        ("zero-length write", lambda: h.pwrite(b"", 100)),
        ("zero-length zero", lambda: h.zero(0, 100)),
        ("zero-length trim", lambda: h.trim(0, 100)),
        ("zero-length read at the end", lambda: h.pread(0, size))]:
    may_fail(what, fn)

other = nbd.NBD()
other.connect_uri("'"$uri"'")
assert other.pread(len(bystander), 5000000) == bystander, "bystander data lost"
assert other.pread(1, size - 1) == bytes(1)
'
kill -0 "$(cat "$tmp/sock.pid")" || fail "nbdkit died"
