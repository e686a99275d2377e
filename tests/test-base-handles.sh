#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-base-handles=N: each export's overlay reads its base through N
# plugin contexts its clients share, opened once.  nbdkit's log filter
# under the cow filter logs every open of the plugin: while nbdcopy
# copies out with four connections and qemu-img converts, the plugin
# is opened once (N=1) or twice (N=2) per export, against once per
# client connection without the parameter; the copies hold the base
# plus the writes, and cow-stats counts the opens.  A bad N stops
# nbdkit at start.
. "$abs_top_srcdir/tests/functions.sh"

for v in -1 65 abc 1.5 ""; do
  expect_start_failure "cow-base-handles=$v: must be a number from 0 to 64" \
    --filter=cow memory 1M cow-base-handles="$v"
done

# A 16M base of distinct bytes, and what it reads as after the writes.
"$PYTHON" - "$tmp/base" "$tmp/expected" <<'PY'
import sys
base = bytearray(b"".join(b"%015d\n" % i for i in range(1 << 20)))
open(sys.argv[1], "wb").write(base)
for offset, data in [(0, b"A" * 4096), (5 << 20, b"B" * 70000),
                     ((16 << 20) - 512, b"C" * 512)]:
    base[offset:offset + len(data)] = data
open(sys.argv[2], "wb").write(base)
PY

writes="h.pwrite(b'A' * 4096, 0)
h.pwrite(b'B' * 70000, 5 << 20)
h.pwrite(b'C' * 512, (16 << 20) - 512)"

# copy_out HANDLES EXPORT: serves the base with cow-base-handles=HANDLES
# (no parameter for ""), writes through one connection, copies out with
# nbdcopy (four connections) and qemu-img, checks both copies, and
# leaves the opens of the plugin the log filter saw in $opens and those
# cow-stats counted in $counted.
copy_out ()
{
  local sock=$tmp/sock$1 uri
  rm -f "$tmp/log" "$tmp/stats.json" "$tmp/out1" "$tmp/out2"
  start_nbdkit "$sock" --filter=cow --filter=log file "$tmp/base" \
    logfile="$tmp/log" cow-stats="$tmp/stats.json" \
    ${1:+cow-base-handles=$1}
  uri="nbd+unix:///?socket=$sock"
  nbdsh -u "$uri" -c "$writes"
  nbdcopy --connections=4 --threads=4 "$uri" "$tmp/out1"
  qemu-img convert -f raw -O raw "$uri" "$tmp/out2"
  cmp "$tmp/out1" "$tmp/expected" || fail "nbdcopy's copy, handles=$1"
  cmp "$tmp/out2" "$tmp/expected" || fail "qemu-img's copy, handles=$1"
  stop_nbdkit "$(cat "$sock.pid")" "$sock.err"     # writes the statistics
  opens=$(grep -c 'Connect export=' "$tmp/log")
  counted=$(jq '.exports[0].plugin_opens' "$tmp/stats.json")
}

copy_out ""
echo "opens without cow-base-handles: $opens"
[ "$opens" -ge 6 ] || fail "one open per client connection expected, got $opens"
[ "$counted" = "$opens" ] || fail "cow-stats counted $counted opens of $opens"
copy_out 1
echo "opens with cow-base-handles=1: $opens"
[ "$opens" -eq 1 ] || fail "cow-base-handles=1: $opens opens of the plugin"
[ "$counted" = 1 ] || fail "cow-base-handles=1: cow-stats counted $counted"
copy_out 2
echo "opens with cow-base-handles=2: $opens"
[ "$opens" -eq 2 ] || fail "cow-base-handles=2: $opens opens of the plugin"

# One pool per export: two exports, each its own writes, two opens.
# nbdkit before 1.44 opens a shared handle without the export's name,
# so there a named export gets a handle per connection (four opens),
# said once.
start_nbdkit "$tmp/sockx" --filter=cow --filter=log memory 1M \
  logfile="$tmp/logx" cow-base-handles=1
for name in a b a b; do
  nbdsh -c "
h = nbd.NBD()
h.set_export_name('$name')
h.connect_unix('$tmp/sockx')
old = h.pread(4, 0)
assert old in (bytes(4), b'$name' * 4), old
h.pwrite(b'$name' * 4, 0)
"
done
case $("$system_nbdkit" --version) in
  "nbdkit 1."[0-3][0-9].*|"nbdkit 1.4"[0-3].*) want=4
    grep -q 'a named export gets a plugin handle per connection' \
      "$tmp/sockx.err" || fail "two exports: not said" ;;
  *) want=2 ;;
esac
[ "$(grep -c 'Connect export=' "$tmp/logx")" -eq "$want" ] ||
  fail "two exports: $(grep -c 'Connect export=' "$tmp/logx") opens, not $want"
