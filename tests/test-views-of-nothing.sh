#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A view of an export that has no overlay and no kept file (NAME@VIEW,
# NAME+CP, NAME+, NAME@, NAME@VIEW+CP, and names that hold the
# separator, +++ and a+b+) is refused, naming what it lacks,
# before an overlay is made for it: no client can fill cow-file's
# directory with empty files by asking for such names.  An export
# whose kept file a run before left serves its changes since a
# checkpoint kept there before any client opened the export itself.
# The default export's changes view, +, is served at once, before any
# client opened the default export.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 8 * M ))
kept_files () { (cd "$tmp" && ls k.cow* 2>/dev/null | tr '\n' ' '); }
uri () { echo "nbd+unix:///$1?socket=$tmp/sock"; }
refused () # NAME PATTERN: reading NAME fails, the log naming PATTERN
{
  ! nbdinfo --size "$(uri "$1")" >/dev/null 2>&1 ||
    fail "export \"$1\" was served"
  grep -qF "$2" "$tmp/sock.err" || fail "\"$1\" refused without: $2"
}

serve_views cow-file="$tmp/k.cow" cow-max-exports=3
nbdsh -u "$(uri kept)" -c 'h.pwrite(b"k" * 65536, 0)'
"$NBDCOW" checkpoint create "$tmp/ctl" kept cp
before=$(kept_files)
for i in 1 2 3 4 5; do
  refused "a$i@v" "export \"a$i\" has no view \"v\""
  refused "b$i+cp" "export \"b$i\" has no checkpoint \"cp\""
  refused "c$i@" "export \"c$i@\": names no view"
  refused "d$i@v+cp" "export \"d$i\" has no view \"v\""
  refused "e$i+" "export \"e$i\" has no overlay, so no changes"
done
refused "+++" "export \"++\" has no overlay, so no changes"
refused "a+b+" "export \"a+b\" has no overlay, so no changes"
[ "$(kept_files)" = "$before" ] ||
  fail "refused views made files: $(kept_files), before: $before"
nbdsh -u "$(uri new)" -c 'h.pwrite(b"n", 0)' ||
  fail "a new export is refused after the refused views"
refused "kept@v" "export \"kept\" has no view \"v\""
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# After a restart, the kept export's checkpoint serves first.
serve_views cow-file="$tmp/k.cow"
changed=$(nbdsh -u "$(uri kept+cp)" -c 'print(h.get_size())') ||
  fail "kept+cp refused after the restart: $(cat "$tmp/sock.err")"
[ "$changed" -eq $(( 8 * M )) ] || fail "kept+cp's size is $changed"
refused "gone+cp" "export \"gone\" has no checkpoint \"cp\""
[ "$(kept_files)" = "k.cow k.cow.kept k.cow.new " ] ||
  fail "the files after the restart: $(kept_files)"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-changes-separator=+
[ "$(nbdinfo --size "$(uri +)")" = $(( 8 * M )) ] ||
  fail "+ refused before the default export was opened: $(cat "$tmp/sock.err")"
refused "x+" "export \"x\" has no overlay, so no changes"
echo "views of exports that have nothing are refused, making nothing"
