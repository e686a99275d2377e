#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow backup of a kept overlay (cow-file): the backup chain of
# tests/backup-chain.py while four connections write, zero and trim;
# then a chain across restarts of the server over the same file, one
# after kill -9 (after a flush), one after a clean stop, each increment
# made with --base=PREV of the run before, each backup the disk at its
# instant and holding just what was written since the one before.
# nbdcow info offline lists the checkpoints.  A PREV made before the
# file was made again is refused, even where the new file has a
# checkpoint of its name.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 16 * 1024 * 1024 ))
ov=$tmp/ov.cow
ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
serve () { serve_views cow-file="$ov"; }
serve
mkdir "$tmp/chain"
pick_seed
"$PYTHON" "$tests/backup-chain.py" "$tmp/sock" "$ctl" "$NBDCOW" \
  "$tmp/base" "$(rounds 4 2)" "$seed" "$tmp/chain"

# backup NAME [PREV]: a backup at checkpoint NAME, over PREV if given,
# which must read as the export.
backup ()
{
  "$NBDCOW" backup --keep-base-checkpoint ${2:+--base="$2"} "$ctl" "$uri" \
    "$1" "$tmp/$1.qcow2" >/dev/null || fail "backup $1 over ${2:-nothing} refused"
  qemu-img compare -q "$tmp/$1.qcow2" "$uri" ||
    fail "backup $1 is not the disk"
}
# holds NAME OFFSET-BLOCKS: the increment NAME holds 1M at that block.
holds ()
{
  local held
  held=$(qemu-img map --output=json "$tmp/$1.qcow2" |
         jq -c '[.[] | select(.depth == 0) | [.start, .length]]')
  [ "$held" = "[[$(( $2 * 65536 )),1048576]]" ] ||
    fail "increment $1 holds $held, not the 1M written at block $2"
}
write_1m () { nbdsh -u "$uri" -c "h.pwrite(b'$1' * 1048576, $2 * 65536)
h.flush()"; }

backup r0
write_1m a 16
kill -9 "$(cat "$tmp/sock.pid")"
sleep 0.2
serve
backup r1 r0.qcow2
holds r1 16
write_1m b 48
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
"$NBDCOW" info "$ov" >"$tmp/info"
for cp in r0 r1; do
  grep -q "^checkpoint $cp: " "$tmp/info" ||
    fail "nbdcow info lists no checkpoint $cp: $(cat "$tmp/info")"
done
serve
backup r2 r1.qcow2
holds r2 48
qemu-img compare -q "$tmp/r2.qcow2" "$tmp/base" >/dev/null &&
  fail "the chain reads as the base: the test proves nothing"

# The file made again: its checkpoint r2 is another.
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm "$ov"
serve
nbdinfo --size "$uri" >/dev/null
"$NBDCOW" checkpoint create "$ctl" "" r2
expect_exit 1 'holds the disk at another checkpoint "r2"' \
  "$NBDCOW" backup --base="$tmp/r2.qcow2" "$ctl" "$uri" r3 "$tmp/r3.qcow2"
[ ! -e "$tmp/r3.qcow2" ] || fail "a refused backup left r3.qcow2"
echo "backups of a kept overlay across kill -9 and a restart restore" \
  "exactly; a PREV of a file made again is refused"
