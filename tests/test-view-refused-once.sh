#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A client refused a view or a changes view is told why once: a client
# asking for a name's details, then for the export, opens it twice in
# one connection, and nbdkit's log holds one error line for each name
# refused (a view the export lacks, a view separator naming no view, a
# checkpoint it lacks, a view ended with the server), not one per
# open.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
ctl=$tmp/ctl
serve_views cow-file="$tmp/ov.cow"
"$NBDCOW" view create "$ctl" "" v >/dev/null
kill -9 "$(cat "$tmp/sock.pid")"
sleep 0.2
serve_views cow-file="$tmp/ov.cow"

once () # NAME PATTERN: NAME is refused, the log saying PATTERN once
{
  nbdsh -c "
h.set_opt_mode(True)
h.set_export_name('$1')
h.connect_unix('$tmp/sock')
for ask in (h.opt_info, h.opt_go):
    try:
        ask()
    except nbd.Error:
        continue
    raise SystemExit('served')
" || fail "export \"$1\" was served"
  n=$(grep -c "error: .*$2" "$tmp/sock.err" || true)
  [ "$n" -eq 1 ] || fail "\"$1\" refused with $n error lines saying: $2"
}
once "@nosuch" 'export "" has no view "nosuch"'
once "@" 'export "@": names no view'
once "+nosuch" 'export "" has no checkpoint "nosuch"'
once "@v" 'view "v" of export "" ended with the nbdkit that made it'
echo "each refused view is said once"
