#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow backup exits 0 only with a right image: a control socket no
# server listens on, a server without views, without changes views (for
# an increment) or keeping its overlay in a file, a PREV that no
# backup made, one of another export, one at a checkpoint the export no
# longer has or has made again, one of another server, one whose chain
# holds OUT or a file cut short; a URI of no NBD server or export; a
# view that breaks; an OUT that is a directory; a --freeze command that
# fails, and a bad NAME are each refused, naming what is wrong, leaving
# no OUT and no view or checkpoint behind.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 8 * M ))
ctl=$tmp/ctl
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-control="$ctl" \
  cow-view-separator=@ cow-changes-separator=+ cow-clone-separator=~
uri () { echo "nbd+unix:///$1?socket=$tmp/sock"; }
cd "$tmp"
refused () # STATUS PATTERN OUT ARGS...: nbdcow backup ARGS fails so
{
  local status=$1 pattern=$2 out=$3; shift 3
  expect_exit "$status" "$pattern" "$NBDCOW" backup "$@"
  [ ! -f "$out" ] || [ "$out" = full.qcow2 ] || fail "$* left $out"
  "$NBDCOW" view show "$ctl" "" | grep -q . && fail "$* left a view"
  "$NBDCOW" checkpoint list "$ctl" "" | grep -qx bad &&
    fail "$* left checkpoint bad"
  return 0
}

nbdsh -u "$(uri "")" -c 'h.pwrite(b"a" * 65536, 1 << 20)'
nbdsh -u "$(uri "g~c1")" -c 'h.pwrite(b"c" * 65536, 0)'
"$NBDCOW" backup "$ctl" "$(uri "")" b1 full.qcow2 >/dev/null
"$NBDCOW" backup "$ctl" "$(uri "g~c1")" c1 clone.qcow2 >/dev/null

refused 3 'cannot connect' out.qcow2 "$tmp/nothing" "$(uri "")" bad out.qcow2
refused 3 'nbd_connect_uri' out.qcow2 "$ctl" "nbd+unix:///?socket=$tmp/none" \
  bad out.qcow2
refused 1 'not a backup made by nbdcow backup' out.qcow2 \
  --base=base "$ctl" "$(uri "")" bad out.qcow2
qemu-img create -q -f qcow2 other.qcow2 8M
refused 1 'not a backup made by nbdcow backup' out.qcow2 \
  --base=other.qcow2 "$ctl" "$(uri "")" bad out.qcow2
refused 1 'a backup of export "g~c1", not of ""' out.qcow2 \
  --base=clone.qcow2 "$ctl" "$(uri "")" bad out.qcow2
refused 1 'full.qcow2, --base itself' full.qcow2 \
  --base=full.qcow2 "$ctl" "$(uri "")" bad full.qcow2
mkdir dir.qcow2
refused 1 'is not a regular file' dir.qcow2 "$ctl" "$(uri "")" bad dir.qcow2
refused 1 'NAME "" is not a checkpoint' out.qcow2 "$ctl" "$(uri "")" "" \
  out.qcow2
refused 1 'NAME "-x" is not a checkpoint' out.qcow2 "$ctl" "$(uri "")" -- -x \
  out.qcow2
refused 1 'it has a checkpoint "b1"|checkpoint "b1"' out.qcow2 \
  "$ctl" "$(uri "")" b1 out.qcow2
refused 1 'unknown NBD URI scheme' out.qcow2 "$ctl" http://localhost/ bad \
  out.qcow2
refused 1 'does not serve export "@b1"' out.qcow2 "$ctl" "$(uri @b1)" \
  bad out.qcow2

# OUT anywhere in PREV's chain, and a PREV or a file of its chain cut
# short.
"$NBDCOW" backup --keep-base-checkpoint --base=full.qcow2 "$ctl" "$(uri "")" \
  b2 inc.qcow2 >/dev/null
refused 1 'full.qcow2, in the backing chain of --base' full.qcow2 \
  --base=inc.qcow2 "$ctl" "$(uri "")" bad full.qcow2
cp full.qcow2 full-saved.qcow2
truncate -s 65536 full.qcow2
refused 1 'is a backup cut short: 65536 bytes' out.qcow2 \
  --base=inc.qcow2 "$ctl" "$(uri "")" bad out.qcow2
mv full-saved.qcow2 full.qcow2

# A checkpoint deleted and made again is another checkpoint.
"$NBDCOW" checkpoint delete "$ctl" "" b1
refused 1 'checkpoint "b1" of export "", which the server does not have' \
  out.qcow2 --base=full.qcow2 "$ctl" "$(uri "")" bad out.qcow2
"$NBDCOW" backup "$ctl" "$(uri "")" b1 full-again.qcow2 >/dev/null
refused 1 'another checkpoint "b1" than the export' out.qcow2 \
  --base=full.qcow2 "$ctl" "$(uri "")" bad out.qcow2
refused 1 '--freeze=false: exit status 1' out.qcow2 --freeze=false \
  "$ctl" "$(uri "")" bad out.qcow2
"$NBDCOW" view create "$ctl" "" busy >/dev/null
expect_exit 1 'it has a view "busy" already' \
  "$NBDCOW" backup "$ctl" "$(uri "")" bad out.qcow2
"$NBDCOW" view delete "$ctl" "" busy
[ ! -e out.qcow2 ] || fail "a refused backup left out.qcow2"
"$NBDCOW" checkpoint list "$ctl" "" | grep -qx bad &&
  fail "a refused backup left checkpoint bad"

# A PREV of another server, with the same export and checkpoint names.
make_base "$tmp/small" $(( 4 * M ))
start_nbdkit "$tmp/small.sock" --filter=cow file "$tmp/small" \
  cow-control="$tmp/small.ctl" cow-view-separator=@ cow-changes-separator=+
nbdsh -u "nbd+unix:///?socket=$tmp/small.sock" -c 'h.pwrite(b"s" * 512, 0)'
"$NBDCOW" backup "$tmp/small.ctl" "nbd+unix:///?socket=$tmp/small.sock" \
  b1 small.qcow2 >/dev/null
"$NBDCOW" checkpoint delete "$ctl" "" b1
"$NBDCOW" backup "$ctl" "$(uri "")" b1 full.qcow2 >/dev/null
expect_exit 1 'a backup of export "", not of ""|another checkpoint "b1"' \
  "$NBDCOW" backup --base=small.qcow2 "$ctl" "$(uri "")" bad out.qcow2

# Servers without views, without changes views, with a kept overlay.
start_nbdkit "$tmp/plain.sock" --filter=cow file "$tmp/base" \
  cow-control="$tmp/plain.ctl"
nbdinfo --size "nbd+unix:///?socket=$tmp/plain.sock" >/dev/null
expect_exit 1 'no cow-view-separator' "$NBDCOW" backup "$tmp/plain.ctl" \
  "nbd+unix:///?socket=$tmp/plain.sock" bad out.qcow2
start_nbdkit "$tmp/nochg.sock" --filter=cow file "$tmp/base" \
  cow-control="$tmp/nochg.ctl" cow-view-separator=@
nbdinfo --size "nbd+unix:///?socket=$tmp/nochg.sock" >/dev/null
"$NBDCOW" backup "$tmp/nochg.ctl" "nbd+unix:///?socket=$tmp/nochg.sock" \
  b1 nochg.qcow2 >/dev/null
expect_exit 1 'no cow-changes-separator' "$NBDCOW" backup --base=nochg.qcow2 \
  "$tmp/nochg.ctl" "nbd+unix:///?socket=$tmp/nochg.sock" b2 out.qcow2
"$NBDCOW" checkpoint list "$tmp/nochg.ctl" "" | grep -qx b2 &&
  fail "a refused increment left checkpoint b2"
start_nbdkit "$tmp/kept.sock" --filter=cow file "$tmp/base" \
  cow-file="$tmp/kept.cow"
nbdinfo --size "nbd+unix:///?socket=$tmp/kept.sock" >/dev/null
stop_nbdkit "$(cat "$tmp/kept.sock.pid")" "$tmp/kept.sock.err"
"$PYTHON" "$abs_top_srcdir/tests/kept-format.py" v5 "$tmp/kept.cow"
rm -f "$tmp/kept.sock"
start_nbdkit "$tmp/kept.sock" --filter=cow file "$tmp/base" \
  cow-file="$tmp/kept.cow" cow-control="$tmp/kept.ctl" cow-view-separator=@
expect_exit 1 'format version 5 or older, which keeps no views' \
  "$NBDCOW" backup "$tmp/kept.ctl" \
  "nbd+unix:///?socket=$tmp/kept.sock" bad out.qcow2
[ ! -e out.qcow2 ] || fail "a refused backup left out.qcow2"

# A view that breaks (the overlay out of room for it) fails the backup.
start_nbdkit "$tmp/full.sock" --filter=cow file "$tmp/base" cow-max-size=3M \
  cow-control="$tmp/full.ctl" cow-view-separator=@
full_uri="nbd+unix:///?socket=$tmp/full.sock"
nbdsh -u "$full_uri" -c 'h.pwrite(b"h" * (2 << 20), 0)'
overwrite="nbdsh -u '$full_uri' -c 'h.pwrite(b\"n\" * (2 << 20), 0)'"
expect_exit 1 'Input/output error|broken' "$NBDCOW" backup \
  --thaw="$overwrite" "$tmp/full.ctl" "$full_uri" bad out.qcow2
[ ! -e out.qcow2 ] || fail "a backup of a broken view left out.qcow2"
! "$NBDCOW" view show "$tmp/full.ctl" "" | grep -q . ||
  fail "a backup of a broken view left it"
