#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The plugin is opened read-only and receives no write, zero or trim;
# the export is writable even over a read-only plugin.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
sum=$(md5sum < "$tmp/base")
# The log filter sits below ours and records what reaches the plugin.
"$NBDKIT" -U - --filter=cow --filter=log file "$tmp/base" \
  logfile="$tmp/log" cow-block-size=4K \
  --run 'nbdinfo "$uri" | grep -q "is_read_only: false" &&
         nbdsh -u "$uri" -c "
h.pwrite(b\"a\" * 100000, 1000)
h.zero(200000, 300000)
h.zero(200000, 600000, nbd.CMD_FLAG_NO_HOLE)
h.trim(1000000, 1000000)
h.flush()
assert h.pread(10, 1000) == b\"a\" * 10
"' || fail "client failed"
[ "$(md5sum < "$tmp/base")" = "$sum" ] || fail "base file changed"
grep -q 'Connect .* write=0' "$tmp/log" || fail "plugin not opened read-only"
if grep -Eq ' (Write|Zero|Trim|Flush) ' "$tmp/log"; then
  grep -E ' (Write|Zero|Trim|Flush) ' "$tmp/log" >&2
  fail "a write reached the plugin"
fi

# pattern is a read-only plugin; through the filter it takes writes.
"$NBDKIT" -U - --filter=cow pattern 1M --run 'nbdsh -u "$uri" -c "
assert not h.is_read_only()
h.pwrite(b\"hello\", 4096)
assert h.pread(5, 4096) == b\"hello\"
"' || fail "read-only plugin not writable through the filter"
