#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-stats=FILE never replaces what it did not make: a FILE that is a
# device, a directory or a link to one stops nbdkit at start, naming
# the parameter; through a symbolic link to a regular file the report
# replaces that file and the link stays.  The report, which holds the
# export names clients sent, is readable by its owner only.
. "$abs_top_srcdir/tests/functions.sh"

mkdir "$tmp/dir"
ln -s /dev/null "$tmp/to-null"
for file in /dev/null /dev/full "$tmp/dir" "$tmp/to-null"; do
  expect_start_failure "cow-stats=$file: not a regular file" \
    --filter=cow memory 1M cow-stats="$file"
done
[ -c /dev/null ] && [ -c /dev/full ] || fail "a device node was replaced"
[ -L "$tmp/to-null" ] || fail "the link to /dev/null was replaced"

# A new file, and a link to an existing one.
echo old > "$tmp/target"
ln -s target "$tmp/link"
for file in "$tmp/new.json" "$tmp/link"; do
  "$NBDKIT" -U - --filter=cow memory 1M cow-stats="$file" \
    --run 'nbdsh -u "$uri" -c "h.pwrite(b\"x\", 0)"' ||
    fail "cow-stats=$file refused"
done
jq -e '.exports[0].requests.write.count == 1' "$tmp/new.json" >/dev/null ||
  fail "no report in new.json"
[ -L "$tmp/link" ] || fail "the link was replaced by the report"
jq -e '.exports[0].requests.write.count == 1' "$tmp/target" >/dev/null ||
  fail "the link's target holds no report"
for f in "$tmp/new.json" "$tmp/target"; do
  [ "$(stat -c %a "$f")" = 600 ] || fail "$f has mode $(stat -c %a "$f")"
done
[ -z "$(find "$tmp" -name '*.json.*' -o -name 'target.*')" ] ||
  fail "temporary reports left: $(find "$tmp" -name '*.json.*' -o -name 'target.*')"
