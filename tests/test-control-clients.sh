#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Each control client is served on its own: 50 clients that send
# nothing, one that sends a byte every 2 seconds and one that never
# reads its answer delay another's nbdcow checkpoint by less than a
# second, and nbdkit exits at once on SIGTERM with them all connected.
. "$abs_top_srcdir/tests/functions.sh"

ctl=$tmp/ctl
start_nbdkit "$tmp/sock" --filter=cow pattern 16M cow-control="$ctl"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c 'h.pwrite(b"x" * 4096, 0)'

# ms COMMAND...: the milliseconds COMMAND took.
ms ()
{
  local start=$(date +%s%N)
  "$@"
  echo $(( ($(date +%s%N) - start) / 1000000 ))
}
# What a command takes alone (nbdcow's own start counts: under valgrind
# it is most of it).
alone=$(ms "$NBDCOW" checkpoint create "$ctl" "" c0)
echo "checkpoint c0 answered in $alone ms with no other client"

# The nuisances, for 30 seconds, in the background.
$PYTHON - "$ctl" > "$tmp/nuisance.out" 2>&1 <<'PYEOF' &
import socket, sys, time
path = sys.argv[1]
def conn():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    return s
idle = [conn() for _ in range(50)]
mute = conn()               # sends a command, never reads
mute.sendall(b"list\0\0")
mute.shutdown(socket.SHUT_WR)
drip = conn()
print("ready", flush=True)
for _ in range(15):
    try:
        drip.send(b"l")
    except OSError:
        drip = conn()
    time.sleep(2)
PYEOF
nuisance=$!
on_exit "kill $nuisance 2>/dev/null"
for _ in $(seq 100); do
  grep -q ready "$tmp/nuisance.out" && break
  sleep 0.1
done
grep -q ready "$tmp/nuisance.out" || fail "the nuisances: $(cat "$tmp/nuisance.out")"

for i in 1 2 3; do
  sleep 1
  took=$(ms "$NBDCOW" checkpoint create "$ctl" "" "c$i")
  echo "checkpoint c$i answered in $took ms"
  [ "$took" -lt $(( alone + 1000 )) ] ||
    fail "checkpoint c$i took $took ms beside idle clients, $alone ms alone"
done
[ "$("$NBDCOW" checkpoint list "$ctl" "")" = "$(printf 'c0\nc1\nc2\nc3')" ] ||
  fail "list: $("$NBDCOW" checkpoint list "$ctl" "")"

# The NBD socket given by mistake: said so.
expect_exit 3 "an NBD server's socket" "$NBDCOW" checkpoint list "$tmp/sock" ""

took=$(exit_ms "$tmp/sock")
echo "nbdkit exited in $took ms"
# A sanitizer's exit takes seconds of its own; a client that held the
# exit would hold it until its 30 s were over.
bound=$(rounds 2000 10000)
[ "$took" -lt "$bound" ] || fail "nbdkit took $took ms to exit beside control clients"
