#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow backup while four connections write, zero and trim: a full
# backup and increments over it, each the disk at its instant, each
# increment only what changed, the chain committed down the disk at the
# last (tests/backup-chain.py).  An increment holds just the blocks
# written since the backup before.  A backup killed at a random
# moment leaves no file, or a whole one the chain reads rightly, and
# after it the same backup runs again once its view and checkpoint are
# deleted.  --freeze runs before the instant and --thaw after it.
# The space kept for the views is back to 0 at the end.  The server
# runs hangup_threads (functions.sh): the killed backup hangs up with
# reads in flight, on which nbdkit before 1.33.10 aborts.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 16 * 1024 * 1024 ))
stats=$tmp/stats.json
ctl=$tmp/ctl
# shellcheck disable=SC2046
start_nbdkit "$tmp/sock" $(hangup_threads) --filter=cow file "$tmp/base" \
  cow-max-size=1G cow-view-separator=@ cow-changes-separator=+ \
  cow-control="$ctl" cow-stats="$stats"
mkdir "$tmp/chain"
pick_seed
"$PYTHON" "$tests/backup-chain.py" "$tmp/sock" "$ctl" "$NBDCOW" \
  "$tmp/base" "$(rounds 6 3)" "$seed" "$tmp/chain"

uri="nbd+unix:///?socket=$tmp/sock"
prev=chain/$(cd "$tmp/chain" && ls b*.qcow2 | sort -V | tail -1)
for round in $(seq "$(rounds 8 3)"); do
  nbdsh -u "$uri" -c "h.pwrite(b'%d' % $round * 3 * 1048576, $round * 65536)"
  out=$tmp/k$round.qcow2
  "$NBDCOW" backup --connections=1 --base="$prev" "$ctl" "$uri" \
    "k$round" "$out" >/dev/null 2>&1 &
  pid=$!
  sleep "0.0$(( RANDOM % 10 ))"
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if [ -e "$out" ]; then
    qemu-img compare -q "$out" "$uri" ||
      fail "round $round: a killed backup left $out unlike the disk"
  fi
  ! ls "$tmp"/k$round.qcow2.* >/dev/null 2>&1 ||
    fail "round $round: a killed backup left $(ls "$tmp"/k$round.qcow2.*)"
  "$NBDCOW" view delete "$ctl" "" "k$round" >/dev/null 2>&1 || true
  "$NBDCOW" checkpoint delete "$ctl" "" "k$round" >/dev/null 2>&1 || true
  "$NBDCOW" backup --base="$prev" "$ctl" "$uri" "k$round" "$out" \
    >/dev/null || fail "round $round: the backup after the kill failed"
  qemu-img compare -q "$out" "$uri" ||
    fail "round $round: the backup is not the disk"
  held=$(qemu-img map --output=json "$out" |
         jq -c '[.[] | select(.depth == 0) | [.start, .length]]')
  [ "$round" -eq 1 ] || [ "$held" = "[[$(( round * 65536 )),3145728]]" ] ||
    fail "round $round: the increment holds $held, not the 3M written"
  prev=k$round.qcow2
done

# --freeze runs before the instant, --thaw after it.
write_at () { echo "nbdsh -u '$uri' -c 'h.pwrite(b\"$1\" * 512, $2)'"; }
"$NBDCOW" backup --freeze="$(write_at F 0)" --thaw="$(write_at T 512)" \
  "$ctl" "$uri" hooks "$tmp/hooks.qcow2" >/dev/null
qemu-io -f qcow2 -r -c 'read -P 0x46 0 512' -c 'read -v 512 512' \
  "$tmp/hooks.qcow2" >"$tmp/hooks.out"
grep -q "^read 512/512" "$tmp/hooks.out" &&
  ! grep -q '54 54 54 54' "$tmp/hooks.out" ||
  fail "freeze and thaw not around the instant: $(cat "$tmp/hooks.out")"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
jq -e '.exports[0].view == null and
       .server.space.used == .exports[0].blocks.overlay * (65536 + 16)' \
  "$stats" >/dev/null ||
  fail "space after the backups: $(jq -c '[.server.space, .exports[0].blocks,
                                           .exports[0].view]' "$stats")"
