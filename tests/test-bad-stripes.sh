#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A bad cow-stripes stops nbdkit at start, naming the parameter and the
# value; good ones from 1 to 64 start, and with a kept overlay
# (cow-file=) they stripe its write locks, not the file: it stays one.
. "$abs_top_srcdir/tests/functions.sh"

for v in 0 65 -1 abc 1.5 4K ""; do
  expect_start_failure "cow-stripes=$v" --filter=cow memory 1M cow-stripes="$v"
done
for v in 1 2 8 64; do
  "$NBDKIT" -U - --filter=cow memory 1M cow-stripes="$v" \
    --run 'nbdsh -u "$uri" -c "h.pwrite(b\"y\" * 4096, 1048576 - 4096)"' ||
    fail "cow-stripes=$v refused"
done
for v in 1 4; do
  rm -rf "$tmp/kept-dir"
  mkdir "$tmp/kept-dir"
  "$NBDKIT" -U - --filter=cow memory 4M cow-file="$tmp/kept-dir/ov" \
    cow-stripes="$v" cow-stats="$tmp/stats.json" --run 'nbdsh -u "$uri" -c "
h.pwrite(b\"y\" * 3145728, 524288)
h.flush()
assert h.pread(3145728, 524288) == b\"y\" * 3145728
"' || fail "cow-file with cow-stripes=$v refused"
  [ "$(ls "$tmp/kept-dir")" = ov ] ||
    fail "cow-stripes=$v made more than the kept file: $(ls "$tmp/kept-dir")"
  jq -e '.exports[0].overlay_files == 1' "$tmp/stats.json" >/dev/null ||
    fail "cow-stripes=$v: cow-stats does not count one file"
done
