#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# After a restart the fill of a named export's kept overlay goes on
# before any client connects, as the default export's does: nbdkit
# starts the overlays a run before left in files beside cow-file's,
# each once, and nothing from a file that is not an export's (a FIFO
# there is not waited on).  From
# nbdkit 1.44 on a named export's fill reads through the handle its
# first connection opens (the man page says so), so there it starts
# with that connection, one that asks only the size.
. "$abs_top_srcdir/tests/functions.sh"
version=$("$system_nbdkit" --version | awk '{print $2}')
fill_needs_client=
[ "$(printf '1.44.0\n%s\n' "$version" | sort -V | head -1)" = 1.44.0 ] &&
  fill_needs_client=1

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 8 * M ))
ov=$tmp/ov.cow stats=$tmp/stats.json
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
for name in "" foo 'a%20b' bar; do
  nbdsh -u "nbd+unix:///$name?socket=$tmp/sock" \
    -c 'h.pwrite(b"w" * 65536, 1 << 20); h.flush()'
done
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
mv "$ov.bar" "$ov.copy"         # bar's header, not bar's file name
mkfifo "$ov.fifo"               # no writer: opening it to read would wait

rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
  cow-fill=true cow-stats="$stats"
fill_state_is "$stats" complete
if [ -n "$fill_needs_client" ]; then
  fill_state_is "$stats" waiting foo
  # The man page's command, then no client at all.
  nbdinfo --size "nbd+unix:///foo?socket=$tmp/sock" >/dev/null
  nbdinfo --size "nbd+unix:///a%20b?socket=$tmp/sock" >/dev/null
fi
fill_state_is "$stats" complete foo
fill_state_is "$stats" complete "a b"
status=0
timeout 10 nbdinfo --size "nbd+unix:///fifo?socket=$tmp/sock" 2>/dev/null ||
  status=$?
[ "$status" -ne 124 ] || fail "a client of the export whose file is a FIFO hung"
names=$(jq -c '[.exports[].name] | sort' "$stats")
[ "$names" = '["","a b","foo"]' ] || fail "the exports started: $names"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

for file in "$ov.foo" "$ov.a%20b"; do
  "$NBDCOW" info "$file" | grep -q '^complete: yes' ||
    fail "the fill did not complete $file: $("$NBDCOW" info "$file")"
done
[ ! -e "$ov.bar" ] || fail "bar's file made from another's"
! "$NBDCOW" info "$ov.copy" | grep -q '^complete: yes' ||
  fail "the file renamed was filled: $("$NBDCOW" info "$ov.copy")"
rm -f "$tmp/sock"
cmp <("$NBDKIT" -U - --filter=cow null $(( 8 * M )) cow-file="$ov" \
        --run 'nbdcopy "nbd+unix:///foo?socket=$unixsocket" -') \
    <(head -c $M "$tmp/base"; printf 'w%.0s' $(seq 65536)
      tail -c +$(( M + 65537 )) "$tmp/base") ||
  fail "foo's filled overlay reads wrong without its base"
