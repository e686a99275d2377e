#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Under cow-lifetime=clients with cow-file, a kept overlay that ended
# leaves its file for its name's next client, and that file still
# counts: its space against cow-max-size and its name's place against
# cow-max-exports, so that clients asking for ever new names cannot
# fill the directory.  A name opened again takes its file's place and
# space back, counted once.
. "$abs_top_srcdir/tests/functions.sh"

mkdir "$tmp/dir" "$tmp/kept"
make_base "$tmp/dir/a" $(( 4 * 1024 * 1024 ))
start_nbdkit "$tmp/sock" --filter=cow file dir="$tmp/dir" \
  cow-clone-separator=@ cow-lifetime=clients:0 cow-file="$tmp/kept/disk" \
  cow-max-exports=4 cow-max-size=3M cow-stats="$tmp/stats.json"
uri () { echo "nbd+unix:///$1?socket=$tmp/sock"; }

# closed N: waits until N overlays have ended (the statistics, each
# second).
closed ()
{
  for _ in $(seq 40); do
    jq -e ".overlays.closed >= $1" "$tmp/stats.json" >/dev/null 2>&1 &&
      return 0
    sleep 0.1
  done
  fail "$1 overlays have not ended: $(jq -c .overlays "$tmp/stats.json")"
}
used () { sleep 1.1; jq .server.space.used "$tmp/stats.json"; }

# A MiB each into three new names: the first two fit under 3M, kept
# after their clients left; the third is refused for want of space.
written=0
for n in 1 2 3; do
  if nbdsh -u "$(uri "a@$n")" \
       -c 'h.pwrite(b"\1" * (1 << 20), 0); h.flush()' 2>"$tmp/err"; then
    written=$(( written + 1 ))
  else
    grep -q "No space left on device" "$tmp/err" ||
      fail "a@$n failed, not for want of space: $(cat "$tmp/err")"
  fi
  closed "$n"
done
[ "$written" -eq 2 ] ||
  fail "$written MiB written into new names under a cap of 3M, not 2"
held=$(used)

# Opened again, a name counts its file once.
nbdsh -u "$(uri a@1)" -c 'h.pwrite(b"\2" * (1 << 20), 0); h.flush()'
closed 4
[ "$(used)" -eq "$held" ] ||
  fail "a name opened again counts $(used) bytes, not $held"

# Three names rest in their files: the fourth has no place, the rested
# ones still open.
nbdinfo --size "$(uri a@4)" >/dev/null 2>&1 &&
  fail "a fourth name made a file past cow-max-exports=4"
grep -q "cow-max-exports=4: a new export name is refused" "$tmp/sock.err" ||
  fail "the refusal is not logged"
nbdinfo --size "$(uri a@2)" >/dev/null || fail "a rested name is refused"
files=$(find "$tmp/kept" -type f -name 'disk.*' | wc -l)
[ "$files" -eq 3 ] || fail "$files kept files of names, not 3: $(ls "$tmp/kept")"
echo "kept files of ended overlays count against both bounds"
