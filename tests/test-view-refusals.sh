#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# No backup from a view can be silently wrong: a view the export does
# not have, a second view, a changes view since a checkpoint not older
# than its view, a name holding @ on a server without
# cow-view-separator, a view of a server without it, a view of a
# kept overlay in a file of format version 5, and a command naming a
# view where it names an export are each refused, naming what is
# wrong.  A clone has a view of its own.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 8 * M ))
ctl=$tmp/ctl
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-control="$ctl" \
  cow-view-separator=@ cow-changes-separator=+ cow-clone-separator=~
uri () { echo "nbd+unix:///$1?socket=$tmp/sock"; }
refused () # NAME PATTERN: reading NAME fails, the log naming PATTERN
{
  ! nbdinfo --size "$(uri "$1")" >/dev/null 2>&1 ||
    fail "export \"$1\" was served"
  grep -q "$2" "$tmp/sock.err" || fail "\"$1\" refused without: $2"
}
expect_error () # PATTERN COMMAND...: the command fails with status 1, saying PATTERN
{
  local pattern=$1 status=0; shift
  "$@" 2>"$tmp/err" >/dev/null || status=$?
  [ "$status" -eq 1 ] && grep -q "$pattern" "$tmp/err" ||
    fail "$* -> status $status: $(cat "$tmp/err"), not: $pattern"
}

nbdsh -u "$(uri "")" -c 'h.pwrite(b"a" * 65536, 0)'
nbdsh -u "$(uri "g~c1")" -c 'h.pwrite(b"c" * 65536, 0)'
"$NBDCOW" checkpoint create "$ctl" "" c0
nbdsh -u "$(uri "")" -c 'h.pwrite(b"x" * 65536, 1 << 20)'
[ "$("$NBDCOW" view create "$ctl" "" b1)" = "@b1" ] || fail "b1's name"
[ "$("$NBDCOW" view create "$ctl" "g~c1" b1)" = "g~c1@b1" ] ||
  fail "the clone's view's name"
nbdsh -u "$(uri "")" -c 'h.pwrite(b"b" * 65536, 0)'
nbdsh -u "$(uri "g~c1")" -c 'h.pwrite(b"d" * 65536, 0)'
nbdsh -u "$(uri "@b1")" -c 'assert h.pread(65536, 0) == b"a" * 65536' ||
  fail "view b1 reads wrong"
nbdsh -u "$(uri "g~c1@b1")" -c 'assert h.pread(65536, 0) == b"c" * 65536' ||
  fail "the clone's view reads wrong"

expect_error 'it has a view "b1" already' "$NBDCOW" view create "$ctl" "" b2
expect_error 'it has no view "b9"' "$NBDCOW" view delete "$ctl" "" b9
refused "@b9" 'export "" has no view "b9"'
refused "g~c1@" "export \"g~c1@\": names no view"
expect_error 'export "@b1": the name of a view of export ""' \
  "$NBDCOW" view create "$ctl" "@b1" b2
expect_error 'export "+": the name of a view of export ""' \
  "$NBDCOW" view create "$ctl" "+" b2
expect_error 'export "g~c1@b1+": the name of a view of export "g~c1"' \
  "$NBDCOW" checkpoint create "$ctl" "g~c1@b1+" c9
expect_error 'longer than the 4096 bytes NBD carries' \
  "$NBDCOW" view create "$ctl" "$(printf 'F%.0s' $(seq 4095))" b1
refused "g~c2@b1" 'export "g~c2" has no view "b1"'
"$NBDCOW" checkpoint create "$ctl" "" c2
refused "@b1+c2" 'checkpoint "c2" is not older than view "b1"'
refused "@b1+c9" 'has no checkpoint "c9"'
[ "$(nbdinfo --map "$(uri "@b1+c0")" | awk '$4 == "data" { print $1, $2 }')" \
  = "1048576 65536" ] ||
  fail "the view since c0: $(nbdinfo --map "$(uri "@b1+c0")")"
"$NBDCOW" view delete "$ctl" "" b1
refused "@b1" 'export "" has no view "b1"'
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# No view separator: a name with @ is refused, and so is a view.
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-control="$ctl"
nbdinfo --size "$(uri "")" >/dev/null
refused "@b1" "a name with '@' reads an export at an instant only under cow-view-separator=@"
expect_error 'the server has no cow-view-separator' \
  "$NBDCOW" view create "$ctl" "" b1
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# A kept overlay in a file of format version 5 has no views.
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$tmp/ov.cow"
nbdinfo --size "$(uri "")" >/dev/null
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
"$PYTHON" "$tests/kept-format.py" v5 "$tmp/ov.cow"
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-control="$ctl" \
  cow-file="$tmp/ov.cow" cow-view-separator=@
nbdinfo --size "$(uri "")" >/dev/null
expect_error 'its cow-file is of format version 5 or older, which keeps no views' \
  "$NBDCOW" view create "$ctl" "" b1
"$NBDCOW" checkpoint list "$ctl" "" | grep -q . &&
  fail "the refused view left a checkpoint"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
