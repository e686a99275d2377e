#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A name refused after its overlay was made leaves nothing.  A kept
# clone made over an 8M base, the server restarted over a 4M one with
# cow-max-exports=2: the clone is refused on every try, said once per
# try (nbdinfo opens it twice: its details, then the export), and
# keeps neither a place under the bound (a second clone is served),
# nor its file's descriptor and lock (nbdcow reads the file while
# nbdkit runs), nor an entry in the statistics.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 8M "$tmp/base"
"$NBDKIT" -U - --filter=cow file "$tmp/base" cow-file="$tmp/k.cow" \
  cow-clone-separator=@ --run '
  nbdsh -u "nbd+unix:///@a?socket=$unixsocket" -c "h.pwrite(b\"a\", 0)"' ||
  fail "cannot make the clone @a"
truncate -s 4M "$tmp/base"

start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
  cow-file="$tmp/k.cow" cow-clone-separator=@ cow-max-exports=2 \
  cow-stats="$tmp/stats.json"
for try in 1 2 3; do
  ! nbdinfo "nbd+unix:///@a?socket=$tmp/sock" >/dev/null 2>&1 ||
    fail "try $try: the clone of another base size was served"
done
said=$(grep -c 'k.cow.%40a: made for a base of 8388608 bytes' "$tmp/sock.err" || true)
[ "$said" -eq 3 ] || fail "the refusal said $said times for 3 tries: $(cat "$tmp/sock.err")"

"$NBDCOW" info "$tmp/k.cow.%40a" > "$tmp/info" 2>&1 ||
  fail "the refused clone's file is still held: $(cat "$tmp/info")"
for fd in /proc/"$(cat "$tmp/sock.pid")"/fd/*; do
  case "$(readlink "$fd" || true)" in
    *k.cow.%40a) fail "the refused clone's file is still open" ;;
  esac
done
nbdsh -u "nbd+unix:///@b?socket=$tmp/sock" -c 'h.pwrite(b"b", 0)' ||
  fail "a healthy clone is refused after the refused one"
sleep 1.5       # the statistics are rewritten every second
names=$(jq -r '[.exports[].name] | join(",")' "$tmp/stats.json")
[ "$names" = ",@b" ] || fail "the overlays alive are \"$names\", not \",@b\""
