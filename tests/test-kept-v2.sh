#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Overlays of format version 2 (block b at its own offset, as releases
# before the packed format made them) keep working: nbdcow reads them,
# the filter serves and writes them and they stay version 2, and what
# they hold commits and exports as from a version 3 file.
. "$abs_top_srcdir/tests/functions.sh"
. "$abs_top_srcdir/tests/nbdcow-setup.sh"

# A file of version 4 (its blocks held in part held whole), as before.
"$PYTHON" "$tests/kept-format.py" v4 "$ov" "$tmp/base"
"$NBDCOW" map "$ov" > "$tmp/map3"
"$PYTHON" "$tests/kept-format.py" v2 "$ov"
jq -e '.format_version == 2 and .closed_cleanly == true' \
  <("$NBDCOW" info --json "$ov") >/dev/null || fail "not version 2"
length=$(stat -c %s "$ov")
"$NBDCOW" map "$ov" | diff - "$tmp/map3" || fail "the map changed"
"$NBDCOW" check "$ov"

view_of "$tmp/base"
cmp "$tmp/view.img" "$tmp/live.img" || fail "version 2 reads differently"

# Written through the filter, and still version 2 and as long.
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "
h.pwrite(b'n' * 3 * $B, 100 * $B + 5)
h.trim(2 * $B, 10 * $B)
h.flush()
"
nbdcopy "$uri" "$tmp/live.img"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"
jq -e '.format_version == 2' <("$NBDCOW" info --json "$ov") >/dev/null ||
  fail "the filter changed the version"
[ "$(stat -c %s "$ov")" -eq "$length" ] || fail "the file changed length"
view_of "$tmp/base"
cmp "$tmp/view.img" "$tmp/live.img" || fail "version 2 lost writes"

cp "$tmp/base" "$tmp/target"
"$NBDCOW" commit "$ov" "$tmp/target"
cmp "$tmp/target" "$tmp/live.img" || fail "commit of version 2"
"$NBDCOW" export "$ov" --base="$tmp/base" "$tmp/out.qcow2"
qemu-img compare -q "$tmp/out.qcow2" "$tmp/live.img" || fail "export of version 2"
"$NBDCOW" commit --empty "$ov" "$tmp/target"
jq -e '.blocks.overlay == 0 and .blocks.zero == 0' \
  <("$NBDCOW" info --json "$ov") >/dev/null || fail "not emptied"
