#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow backup keeps its exit promises whatever happens at each of
# its control commands (tests/control-proxy.py stands between it and
# the server): with SIGTERM at each, it leaves no OUT.qcow2, no view
# and no checkpoint NAME, and exits 1; with the server killed at each,
# it leaves no OUT.qcow2, exits 3, and says which checkpoint it may
# leave.  OUT.qcow2 exists only with exit 0.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
serve ()
{
  rm -f "$tmp/sock" "$ctl"
  # shellcheck disable=SC2046
  start_nbdkit "$tmp/sock" $(hangup_threads) --filter=cow file "$tmp/base" \
    cow-view-separator=@ cow-changes-separator=+ cow-control="$ctl"
  nbdsh -u "$uri" -c "h.pwrite(b'x' * 65536, 0)"
}

# backup_at VERB ACTION: nbdcow backup through the proxy, which does
# ACTION at the first command VERB; sets status and prints nothing.
backup_at ()
{
  rm -f "$tmp/proxy" "$tmp/proxy.out" "$tmp/out.qcow2"
  "$PYTHON" "$tests/control-proxy.py" "$tmp/proxy" "$ctl" "$1" "$2" \
    "$tmp/$3.pid" > "$tmp/proxy.out" &
  proxy=$!
  while ! grep -qs ready "$tmp/proxy.out"; do sleep 0.05; done
  "$NBDCOW" backup "$tmp/proxy" "$uri" b1 "$tmp/out.qcow2" \
    > "$tmp/backup.out" 2>&1 &
  echo $! > "$tmp/nbdcow.pid"
  status=0
  wait "$!" || status=$?
  kill "$proxy" 2>/dev/null || true
  wait "$proxy" 2>/dev/null || true
}

checkpoints ()
{
  "$NBDCOW" checkpoint list "$ctl" "" || fail "checkpoint list failed"
}
view_of () { "$NBDCOW" view show "$ctl" "" || fail "view show failed"; }

# failed_at VERB ACTION STATUS: the backup with ACTION (term, kill) at
# VERB exited STATUS, printed no success line and left no out.qcow2.
failed_at ()
{
  grep -q "did $2" "$tmp/proxy.out" ||
    fail "$2 at $1: never asked: $(cat "$tmp/backup.out")"
  [ "$status" -eq "$3" ] ||
    fail "$2 at $1: exit $status, not $3: $(cat "$tmp/backup.out")"
  [ ! -e "$tmp/out.qcow2" ] || fail "$2 at $1: out.qcow2 left"
  ! grep -q "backup \"b1\"" "$tmp/backup.out" ||
    fail "$2 at $1: a success line: $(cat "$tmp/backup.out")"
}

serve
verbs="list view-create identify view view#2 view-delete"
for verb in $verbs; do
  backup_at "$verb" term nbdcow
  failed_at "$verb" term 1
  left=$(checkpoints; view_of)
  [ -z "$left" ] || fail "term at $verb: left: $left"
  echo "SIGTERM at $verb: exit 1, nothing left"
done

for verb in $verbs; do
  backup_at "$verb" kill sock
  failed_at "$verb" kill 3
  [ "$verb" = list ] ||
    grep -q "view and checkpoint \"b1\" may be left" "$tmp/backup.out" ||
    fail "kill at $verb: not said what is left: $(cat "$tmp/backup.out")"
  echo "server killed at $verb: exit 3: $(tail -1 "$tmp/backup.out")"
  serve
done

# Through the proxy with nothing done, the backup is made.
backup_at none term nbdcow
[ "$status" -eq 0 ] || fail "exit $status: $(cat "$tmp/backup.out")"
qemu-img compare -q "$tmp/out.qcow2" "$uri" || fail "the backup is not the disk"
left=$(checkpoints)
[ "$left" = b1 ] || fail "checkpoints after the backup: $left"
echo "through the proxy untouched, the backup is made"
