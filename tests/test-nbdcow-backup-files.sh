#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The files nbdcow backup and export write hold a whole disk: they are
# made readable by their owner alone (0600, whatever the umask leaves
# of it), as the overlay is.  A --base named absolutely that lies in
# the output's folder or below is recorded from that folder, so the
# folder moves with its chain; a relative one as given; one elsewhere
# as given.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
serve_views cow-file="$tmp/ov.cow"
mkdir -p "$tmp/b/old" "$tmp/elsewhere"
write () { nbdsh -u "$uri" -c "h.pwrite(b'$1' * 65536, $2 * 65536); h.flush()"; }
backing () { qemu-img info --output=json "$1" | jq -r '."backing-filename"'; }
mode () { stat -c %a "$1"; }

umask 022
"$NBDCOW" backup "$ctl" "$uri" b0 "$tmp/b/old/b0.qcow2" >/dev/null
[ "$(mode "$tmp/b/old/b0.qcow2")" = 600 ] ||
  fail "a backup made mode $(mode "$tmp/b/old/b0.qcow2"), not 600"
write a 1
"$NBDCOW" backup --base="$tmp/b/old/b0.qcow2" "$ctl" "$uri" b1 "$tmp/b/b1.qcow2"
[ "$(backing "$tmp/b/b1.qcow2")" = old/b0.qcow2 ] ||
  fail "an absolute --base below the folder recorded as $(backing "$tmp/b/b1.qcow2")"
write b 2
( cd "$tmp/b" && "$NBDCOW" backup --base=b1.qcow2 "$ctl" "$uri" b2 b2.qcow2 )
[ "$(backing "$tmp/b/b2.qcow2")" = b1.qcow2 ] ||
  fail "a relative --base recorded as $(backing "$tmp/b/b2.qcow2")"
"$NBDCOW" backup "$ctl" "$uri" e0 "$tmp/elsewhere/e0.qcow2" >/dev/null
write c 3
"$NBDCOW" backup --base="$tmp/elsewhere/e0.qcow2" "$ctl" "$uri" e1 \
  "$tmp/b/e1.qcow2" >/dev/null
[ "$(backing "$tmp/b/e1.qcow2")" = "$tmp/elsewhere/e0.qcow2" ] ||
  fail "a --base outside the folder recorded as $(backing "$tmp/b/e1.qcow2")"

# The folder moved: its chain reads as before.
qemu-img convert -O raw "$tmp/b/b2.qcow2" "$tmp/before.raw"
mv "$tmp/b" "$tmp/moved"
qemu-img convert -O raw "$tmp/moved/b2.qcow2" "$tmp/after.raw" ||
  fail "the moved chain does not read"
cmp -s "$tmp/before.raw" "$tmp/after.raw" ||
  fail "the moved chain reads otherwise"

# export: mode 0600, its --base recorded from the folder too.
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
cp "$tmp/base" "$tmp/moved/base.raw"
"$NBDCOW" export --base="$tmp/moved/base.raw" "$tmp/ov.cow" \
  "$tmp/moved/export.qcow2"
[ "$(mode "$tmp/moved/export.qcow2")" = 600 ] ||
  fail "an export made mode $(mode "$tmp/moved/export.qcow2"), not 600"
[ "$(backing "$tmp/moved/export.qcow2")" = base.raw ] ||
  fail "export's --base recorded as $(backing "$tmp/moved/export.qcow2")"
echo "backups and exports are 0600, their --base recorded from their folder"
