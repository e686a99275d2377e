#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Incremental copies through checkpoints (cow-control, nbdcow
# checkpoint): a full copy at checkpoint c1, then writes W2; the view
# since c1 converted with -B full.qcow2 is identical to the export and
# holds only W2's blocks; checkpoint c2, writes W3, the next increment
# chained on the first: identical again, holding only W3's.  The
# control socket is the server user's alone, and every refusal says
# what is wrong: a bad or taken name, one too many, an unknown export
# or checkpoint, a socket another server listens on
# (test-bad-changes-params.sh has the parameters refused at start).
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 48 * M ))
ctl=$tmp/ctl
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
  cow-changes-separator=+ cow-control="$ctl"
live="nbd+unix:///?socket=$tmp/sock"
view () { echo "nbd+unix:///+$1?socket=$tmp/sock"; }

[ "$(stat -c %a "$ctl")" = 600 ] || fail "the control socket's mode is $(stat -c %a "$ctl")"

# write OFFSET-MB LENGTH-KB BYTE [zero|trim]
write ()
{
  nbdsh -u "$live" -c "
off, n = $1 * $M, $2 * 1024
if '${4:-}' == 'zero':
    h.zero(n, off)
elif '${4:-}' == 'trim':
    h.trim(n, off)
else:
    h.pwrite(b'$3' * n, off)
"
}

# allocated FILE: the bytes of a qcow2 file's own clusters (data or
# zero), not its backing file's.
allocated ()
{
  qemu-img map --output=json "$1" | "$PYTHON" -c 'import json, sys
print(sum(e["length"] for e in json.load(sys.stdin) if e["depth"] == 0))'
}

write 1 256 a
write 20 128 b
"$NBDCOW" checkpoint create "$ctl" "" c1
qemu-img convert -f raw -O qcow2 "$live" "$tmp/full.qcow2"

# W2: data over the base's data and its hole, zeroes and a trim over
# W1's data.
write 3 64 c
write 18 192 d
write 1 128 - zero
write 20 64 - trim
qemu-img convert -f raw -O qcow2 -B "$tmp/full.qcow2" -F qcow2 \
  "$(view c1)" "$tmp/inc1.qcow2"
qemu-img compare "$tmp/inc1.qcow2" "$live" ||
  fail "full + increment since c1 is not the export"
got=$(allocated "$tmp/inc1.qcow2")
[ "$got" -eq $(( (64 + 192 + 128 + 64) * 1024 )) ] ||
  fail "the increment since c1 holds $got bytes, not W2's"

"$NBDCOW" checkpoint create "$ctl" "" c2
write 30 64 e
write 3 64 f
qemu-img convert -f raw -O qcow2 -B "$tmp/inc1.qcow2" -F qcow2 \
  "$(view c2)" "$tmp/inc2.qcow2"
qemu-img compare "$tmp/inc2.qcow2" "$live" ||
  fail "full + two increments is not the export"
got=$(allocated "$tmp/inc2.qcow2")
[ "$got" -eq $(( 128 * 1024 )) ] ||
  fail "the increment since c2 holds $got bytes, not W3's"
# Since c1 still holds W2 and W3.
got=$(nbdinfo --map --json "$(view c1)" | "$PYTHON" -c 'import json, sys
print(sum(e["length"] for e in json.load(sys.stdin) if e["type"] != 1))')
[ "$got" -eq $(( (64 + 192 + 128 + 64 + 64) * 1024 )) ] ||
  fail "the view since c1 holds $got bytes after W3"
echo "full copy and two increments equal the export, each holding its writes"

# A zero of part of a block, with trim allowed or not, changes the
# block: the view since c3 reports it whole, and the increment holds
# those two blocks alone.
"$NBDCOW" checkpoint create "$ctl" "" c3
nbdsh -u "$live" -c "
h.zero(4096, 40 * $M + 8192)
h.zero(4096, 2 * $M + 4096, nbd.CMD_FLAG_NO_HOLE)
"
qemu-img convert -f raw -O qcow2 -B "$tmp/inc2.qcow2" -F qcow2 \
  "$(view c3)" "$tmp/inc3.qcow2"
qemu-img compare "$tmp/inc3.qcow2" "$live" ||
  fail "full + three increments is not the export"
got=$(allocated "$tmp/inc3.qcow2")
[ "$got" -eq $(( 2 * 64 * 1024 )) ] ||
  fail "the increment since c3 holds $got bytes, not the two partly zeroed blocks"
"$NBDCOW" checkpoint delete "$ctl" "" c3

# Listing, deleting, and what is refused.
[ "$("$NBDCOW" checkpoint list "$ctl" "")" = "$(printf 'c1\nc2')" ] ||
  fail "list: $("$NBDCOW" checkpoint list "$ctl" "")"
[ "$("$NBDCOW" checkpoint list --json "$ctl" "")" = \
  '{"export": "", "checkpoints": ["c1", "c2"]}' ] || fail "list --json"
expect_exit 1 'it has a checkpoint "c1" already' \
  "$NBDCOW" checkpoint create "$ctl" "" c1
expect_exit 1 '"a/b" cannot name a checkpoint' \
  "$NBDCOW" checkpoint create "$ctl" "" a/b
expect_exit 1 'export "other": no client has opened it' \
  "$NBDCOW" checkpoint create "$ctl" other c1
expect_exit 1 'it has no checkpoint "c9"' \
  "$NBDCOW" checkpoint delete "$ctl" "" c9
expect_exit 3 'cannot connect' \
  "$NBDCOW" checkpoint list "$tmp/nothing" ""
expect_exit 1 'expected create SOCKET' "$NBDCOW" checkpoint create "$ctl" ""
"$NBDCOW" checkpoint delete "$ctl" "" c1
nbdinfo "$(view c1)" >"$tmp/out" 2>&1 && fail "a view of a deleted checkpoint"
grep -q 'has no checkpoint "c1"' "$tmp/sock.err" ||
  fail "the refusal of a view since c1 says nothing"
# The other 31 through the socket itself: nbdcow is checked above, and
# 31 runs of it under valgrind would take half a minute.
"$PYTHON" - "$ctl" <<'PY'
import socket, sys
for i in range(2, 33):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(b"create\0\0k%d\0" % i)
    s.shutdown(socket.SHUT_WR)
    assert s.recv(100) == b"ok\n", i
    s.close()
PY
expect_exit 1 'it has 32 checkpoints, the most it can have' \
  "$NBDCOW" checkpoint create "$ctl" "" k33
# Commands that are not: each answered, the server serving on.
"$PYTHON" - "$ctl" <<'PY'
import os, socket, sys
def ask(data):
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    s.sendall(data)
    s.shutdown(socket.SHUT_WR)
    answer = s.recv(65536)
    s.close()
    assert answer.startswith(b"error: "), (data[:40], answer)
for bad in (b"garbage", b"create\0\0", b"create\0\0c\0more\0", b"list\0",
            b"", b"create\0\0\xff\xfe\0", b"create\0\0" + b"x" * 65 + b"\0",
            os.urandom(100000)):
    ask(bad)
PY
nbdinfo --size "$live" >/dev/null || fail "the server stopped serving"
expect_start_failure 'cow-control=.*another server listens on it' \
  --filter=cow file "$tmp/base" cow-control="$ctl"

# At exit the socket goes; one a killed server left is replaced.
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
[ ! -e "$ctl" ] || fail "the control socket outlived nbdkit"
rm -f "$tmp/sock" "$tmp/sock.pid"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-control="$ctl"
kill -9 "$(cat "$tmp/sock.pid")"
sleep 0.5
rm -f "$tmp/sock" "$tmp/sock.pid"
[ -S "$ctl" ] || fail "no socket left behind by kill -9"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-control="$ctl"
nbdsh -u "$live" -c 'h.pwrite(b"x", 0)'
"$NBDCOW" checkpoint create "$ctl" "" after-restart
