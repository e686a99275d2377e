#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow backup prune --keep=N keeps the newest N backups of a chain:
# the oldest of them becomes a full backup holding what its chain held,
# the older files go, and every backup kept restores exactly as before
# (among the days: a cluster zeroed, then written again; a disk whose
# end is not a cluster's, nor a sector's) and verifies, and the next
# increment over the newest works.
# kill -9 at random moments leaves the old chain or the new one, each
# restoring exactly, with O_TMPFILE and without (tests/no-tmpfile.c:
# then FILE.nbdcow-PID may be left, never FILE changed); run again, it
# prunes.  Two prunes of one chain at once both succeed.  Bad --keep
# values are refused naming them.
. "$abs_top_srcdir/tests/functions.sh"

ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
truncate -s $(( 8 * 1024 * 1024 + 4096 + 100 )) "$tmp/base"
serve_views cow-file="$tmp/ov.cow"
mkdir "$tmp/b"
day () {
  nbdsh -u "$uri" -c "$2"
  last=$(cd "$tmp/b" && ls -1 -- *.qcow2 2>/dev/null | tail -1)
  ( cd "$tmp/b" &&
    "$NBDCOW" backup ${last:+--base="$last"} "$ctl" "$uri" "d$1" \
      "$1.qcow2" >/dev/null ) || fail "day $1: the backup failed"
  qemu-img convert -O raw "$tmp/b/$1.qcow2" "$tmp/r$1.raw"
}
day 1 "h.pwrite(b'1' * 3 * 65536, 100000); h.pwrite(b'e' * 4096, 8 * 1048576)"
day 2 "h.zero(65536, 100000 - 100000 % 65536 + 65536)"
day 3 "h.pwrite(b'3' * 4096, 100000 - 100000 % 65536 + 65536 + 8192)"
day 4 "h.pwrite(b'4' * 65536, 3 * 1048576)"
day 5 "h.trim(65536, 3 * 1048576)"
day 6 "h.pwrite(b'6' * 512, 8 * 1048576 + 512)"
# restores DIR DAY...: each day's backup in DIR restores as it did.
restores () {
  local dir=$1 d; shift
  for d in "$@"; do
    qemu-img check -q "$dir/$d.qcow2" || return 1
    qemu-img compare -q -f qcow2 -F raw "$dir/$d.qcow2" "$tmp/r$d.raw" ||
      return 1
  done
}
files () { (cd "$1" && ls -1 | tr '\n' ' '); }
cp -a "$tmp/b" "$tmp/orig"

chmod 640 "$tmp/orig/4.qcow2"
# Killed at random moments (every third round without O_TMPFILE).
shim=$abs_top_builddir/tests/.libs/no-tmpfile.so
start=$(date +%s%N)
"$NBDCOW" backup prune --keep=3 "$tmp/b/6.qcow2" > "$tmp/said" ||
  fail "prune: $(cat "$tmp/said")"
whole_ms=$(( ($(date +%s%N) - start) / 1000000 + 1 ))
seed=${PRUNE_CRASH_SEED:-$RANDOM}
echo "PRUNE_CRASH_SEED=$seed; a whole prune takes $whole_ms ms"
RANDOM=$seed
for round in $(seq "$(rounds 9 3)"); do
  rm -rf "$tmp/k" && cp -a "$tmp/orig" "$tmp/k"
  env=()
  [ $(( round % 3 )) -eq 0 ] &&
    env=(LD_PRELOAD="${sanitizer_preload:-} $shim")
  env "${env[@]}" "$NBDCOW" backup prune --keep=3 "$tmp/k/6.qcow2" \
    >/dev/null 2>&1 &
  sleep "$(( RANDOM % (whole_ms * 12 / 10 + 1) ))e-3"
  kill -9 $! 2>/dev/null || true
  wait $! 2>/dev/null || true
  rm -f "$tmp"/k/4.qcow2.nbdcow-*
  case $(files "$tmp/k") in
    "1.qcow2 2.qcow2 3.qcow2 4.qcow2 5.qcow2 6.qcow2 ") kept="1 2 3 4 5 6" ;;
    "4.qcow2 5.qcow2 6.qcow2 ") kept="4 5 6" ;;
    *) kept="4 5 6" ;;          # the new chain, older files not all gone
  esac
  restores "$tmp/k" $kept ||
    fail "round $round: after kill -9 the chain ($(files "$tmp/k")) does not restore"
  "$NBDCOW" backup prune --keep=3 "$tmp/k/6.qcow2" >/dev/null ||
    fail "round $round: prune run again failed"
  restores "$tmp/k" 4 5 6 || fail "round $round: prune run again"
done
echo "kill -9 during a prune leaves a chain that restores"

# Two prunes of one chain at once: the one that comes second finds the
# older files gone, or the chain already short; both succeed.
for round in 1 2 3; do
  rm -rf "$tmp/k" && cp -a "$tmp/orig" "$tmp/k"
  "$NBDCOW" backup prune --keep=3 "$tmp/k/6.qcow2" > "$tmp/said1" 2>&1 &
  first=$!
  "$NBDCOW" backup prune --keep=3 "$tmp/k/6.qcow2" > "$tmp/said2" 2>&1 ||
    fail "round $round: a prune beside another failed: $(cat "$tmp/said2")"
  wait "$first" ||
    fail "round $round: a prune beside another failed: $(cat "$tmp/said1")"
  [ "$(files "$tmp/k")" = "4.qcow2 5.qcow2 6.qcow2 " ] ||
    fail "round $round: two prunes at once left $(files "$tmp/k")"
  restores "$tmp/k" 4 5 6 || fail "round $round: two prunes at once"
done
echo "two prunes of one chain at once both succeed"

grep -q "4.qcow2: now a full backup; removed .*3.qcow2 .*2.qcow2 .*1.qcow2" \
  "$tmp/said" || fail "prune said: $(cat "$tmp/said")"
[ "$(files "$tmp/b")" = "4.qcow2 5.qcow2 6.qcow2 " ] ||
  fail "prune left $(files "$tmp/b")"
[ "$(stat -c %a "$tmp/k/4.qcow2")" = 640 ] ||
  fail "the full backup made has mode $(stat -c %a "$tmp/k/4.qcow2")"
restores "$tmp/b" 4 5 6 || fail "a backup kept restores otherwise"
"$NBDCOW" backup verify "$tmp/b/6.qcow2" >/dev/null ||
  fail "the pruned chain does not verify"
qemu-img info "$tmp/b/4.qcow2" | grep -q "^backing file" &&
  fail "4.qcow2 still has a backing file"
day 7 "h.pwrite(b'7' * 4096, 0)"
qemu-img compare -q "$tmp/b/7.qcow2" "$uri" ||
  fail "the increment over a pruned chain does not restore as the disk"
"$NBDCOW" backup prune --keep=5 "$tmp/b/7.qcow2" > "$tmp/said"
grep -q "a chain of 4 backups, 5 kept: nothing to prune" "$tmp/said" ||
  fail "prune of a short chain said: $(cat "$tmp/said")"
"$NBDCOW" backup prune --keep=1 "$tmp/b/7.qcow2" >/dev/null ||
  fail "prune --keep=1 failed"
day 8 "h.pwrite(b'8' * 4096, 65536)"   # its record's disk size exact
qemu-img compare -q "$tmp/b/8.qcow2" "$uri" ||
  fail "the increment over a chain pruned to one does not restore"
echo "prune keeps the newest backups of a chain, each restoring exactly"

for bad in 0 -1 x 1025; do
  "$NBDCOW" backup prune --keep="$bad" "$tmp/b/7.qcow2" 2>"$tmp/err" &&
    fail "--keep=$bad accepted"
  grep -q -- "--keep=$bad: not a number of backups" "$tmp/err" ||
    fail "--keep=$bad: $(cat "$tmp/err")"
done
"$NBDCOW" backup prune --keep=1 "$tmp/b/none.qcow2" 2>"$tmp/err" &&
  fail "a missing file pruned"
grep -q "none.qcow2" "$tmp/err" || fail "a missing file: $(cat "$tmp/err")"
echo "bad --keep values and files are refused"
