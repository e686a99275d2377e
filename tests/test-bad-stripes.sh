#!/usr/bin/env bash
# A bad cow-stripes stops nbdkit at start, naming the parameter and the
# value, as does more than one stripe for a kept overlay (cow-file=);
# good ones from 1 to 64 start.
. "$abs_top_srcdir/tests/functions.sh"

for v in 0 65 -1 abc 1.5 4K ""; do
  expect_start_failure "cow-stripes=$v" --filter=cow memory 1M cow-stripes="$v"
done
expect_start_failure "cow-stripes=4: a kept overlay \(cow-file=\) is one file" \
  --filter=cow memory 1M cow-file="$tmp/kept" cow-stripes=4
[ ! -e "$tmp/kept" ] || fail "the refused start created $tmp/kept"
for v in 1 2 8 64; do
  "$NBDKIT" -U - --filter=cow memory 1M cow-stripes="$v" \
    --run 'nbdsh -u "$uri" -c "h.pwrite(b\"y\" * 4096, 1048576 - 4096)"' ||
    fail "cow-stripes=$v refused"
done
"$NBDKIT" -U - --filter=cow memory 1M cow-file="$tmp/kept" cow-stripes=1 \
  --run 'nbdinfo --size "$uri"' >/dev/null || fail "cow-file with cow-stripes=1 refused"
