#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A kept overlay's checkpoints live in its file (format version 4):
# full copy at c1, writes W2, kill -9 and restart, the increment since
# c1 holds W2 alone and equals the export; c2, writes W3, kill -9, the
# next increment holds W3 alone.  Offline, nbdcow info lists them with
# what changed since each, map --since gives those ranges and
# export --since writes the same increment.  Writes not flushed when
# nbdkit is killed make every block count as changed (never fewer) if
# they went into a block the overlay held (format version 8: into new
# space, which only a flushed entry names, they leave the marks exact).
# A file of format version 3 still serves, and refuses checkpoints;
# commit --empty drops them.
. "$abs_top_srcdir/tests/functions.sh"

K=1024
M=$(( K * K ))
make_base "$tmp/base" $(( 16 * M ))
ov=$tmp/ov
ctl=$tmp/ctl
live="nbd+unix:///?socket=$tmp/sock"
view () { echo "nbd+unix:///+$1?socket=$tmp/sock"; }
serve ()
{
  rm -f "$tmp/sock" "$ctl"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
    cow-changes-separator=+ cow-control="$ctl"
}
crash () { kill -9 "$(cat "$tmp/sock.pid")"; sleep 0.2; }

# write OFFSET-KB LENGTH-KB BYTE|zero [noflush]
write ()
{
  nbdsh -u "$live" -c "
off, n = $1 * 1024, $2 * 1024
if '$3' == 'zero':
    h.zero(n, off)
else:
    h.pwrite(b'$3' * n, off)
if '${4:-}' != 'noflush':
    h.flush()
"
}

# allocated FILE: the bytes of a qcow2 file's own clusters.
allocated ()
{
  qemu-img map --output=json "$1" | "$PYTHON" -c 'import json, sys
print(sum(e["length"] for e in json.load(sys.stdin) if e["depth"] == 0))'
}

# increment SINCE BACKING OUT: the view since SINCE as a qcow2 over
# BACKING, checked against the export.
increment ()
{
  qemu-img convert -f raw -O qcow2 -B "$2" -F qcow2 "$(view "$1")" "$3"
  qemu-img compare -q "$3" "$live" || fail "$3 is not the export"
}

serve
write 1024 256 a
"$NBDCOW" checkpoint create "$ctl" "" c1
qemu-img convert -f raw -O qcow2 "$live" "$tmp/full.qcow2"
write 3072 64 b
write 9216 128 zero
crash
serve
increment c1 "$tmp/full.qcow2" "$tmp/inc1.qcow2"
got=$(allocated "$tmp/inc1.qcow2")
[ "$got" -eq $(( (64 + 128) * K )) ] ||
  fail "after kill -9 the increment since c1 holds $got bytes, not W2's"
nbdinfo --map "$(view c1)" >"$tmp/c1.map"

"$NBDCOW" checkpoint create "$ctl" "" c2
write 5120 64 c
write 3072 64 d
crash
serve
increment c2 "$tmp/inc1.qcow2" "$tmp/inc2.qcow2"
got=$(allocated "$tmp/inc2.qcow2")
[ "$got" -eq $(( 128 * K )) ] ||
  fail "after kill -9 the increment since c2 holds $got bytes, not W3's"
[ "$("$NBDCOW" checkpoint list "$ctl" "")" = "$(printf 'c1\nc2')" ] ||
  fail "the checkpoints after restarts: $("$NBDCOW" checkpoint list "$ctl" "")"
echo "a full copy and two increments across kill -9 equal the export"

# Offline: what the live view said, from the file.
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
"$NBDCOW" info "$ov" | grep -q '^checkpoint c1: 262144 bytes changed since$' ||
  fail "info since c1: $("$NBDCOW" info "$ov")"
jq -e '.checkpoints == [{"name": "c1", "changed_bytes": 262144},
                        {"name": "c2", "changed_bytes": 131072}] and
       .marks_exact' <("$NBDCOW" info --json "$ov") >/dev/null ||
  fail "info --json: $("$NBDCOW" info --json "$ov")"
"$NBDCOW" map --json --since=c2 "$ov" | jq -c '[.[] | select(.state != "base")]' \
  >"$tmp/c2.ranges"
[ "$(cat "$tmp/c2.ranges")" = \
  '[{"offset":3145728,"length":65536,"state":"overlay"},{"offset":5242880,"length":65536,"state":"overlay"}]' ] ||
  fail "map --since=c2: $(cat "$tmp/c2.ranges")"
"$NBDCOW" export --since=c2 "$ov" --base="$tmp/inc1.qcow2" "$tmp/off2.qcow2"
qemu-img compare -q "$tmp/off2.qcow2" "$tmp/inc2.qcow2" ||
  fail "export --since=c2 differs from the live increment"
[ "$(allocated "$tmp/off2.qcow2")" -eq $(( 128 * K )) ] ||
  fail "export --since=c2 holds more than W3"
expect_exit 1 "$ov: no checkpoint \"c9\"" "$NBDCOW" map --since=c9 "$ov"
echo "nbdcow lists the checkpoints and exports the same increment"

overlay_ranges () { "$NBDCOW" map --json "$@" "$ov" | jq -c '[.[] | select(.state != "base")]'; }
# A write into new space in flight at a kill: the marks stay exact.
serve
write 7168 64 e noflush
crash
[ "$(overlay_ranges --since=c2)" = "$(cat "$tmp/c2.ranges")" ] ||
  fail "map --since=c2 after a write into new space in flight: $(overlay_ranges --since=c2)"
jq -e '.marks_exact' <("$NBDCOW" info --json "$ov") >/dev/null ||
  fail "a write into new space in flight left the marks stale"

# Writes in flight at a kill into a block held since before c2: every
# block of the overlay counts as changed since each checkpoint, and the
# increment still equals the export.
serve
write 1024 64 e noflush
crash
# Offline, the file the kill left says its marks may miss a change:
# map --since counts every block of the overlay as changed.
[ "$(overlay_ranges --since=c2)" = "$(overlay_ranges)" ] ||
  fail "map --since=c2 of a file with stale marks: $(overlay_ranges --since=c2)"
serve
increment c2 "$tmp/inc1.qcow2" "$tmp/inc3.qcow2"
got=$(allocated "$tmp/inc3.qcow2")
[ "$got" -ge $(( 128 * K )) ] || fail "after an unflushed kill, $got bytes"
# Every block: W1, W2 and W3's data at least, not W3 alone.
[ "$got" -ge $(( 384 * K )) ] ||
  fail "after an unflushed kill, $got bytes: not every block of the overlay"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# commit --empty merges the changes into the base: the checkpoints go.
cp "$tmp/base" "$tmp/merged"
"$NBDCOW" commit --empty "$ov" "$tmp/merged" >/dev/null
"$NBDCOW" info "$ov" | grep -q '^checkpoints: none$' ||
  fail "commit --empty kept the checkpoints"

# Format version 3: served, no checkpoints.
rm -f "$ov"
serve
write 1024 64 f
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
"$PYTHON" "$tests/kept-format.py" v3 "$ov"
serve
nbdsh -u "$live" -c "assert h.pread(65536, 1024 * 1024) == b'f' * 65536"
expect_exit 1 'its cow-file is of an older format, which keeps no checkpoints' \
  "$NBDCOW" checkpoint create "$ctl" "" c1
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
jq -e '.format_version == 3 and .checkpoints == []' \
  <("$NBDCOW" info --json "$ov") >/dev/null || fail "version 3 info"
expect_exit 1 "format version 3 keeps no checkpoints" \
  "$NBDCOW" map --since=c1 "$ov"
echo "a version 3 file serves and refuses checkpoints"
