#!/usr/bin/env bash
# A bad cow-block-size stops nbdkit at start, naming the parameter and
# the value; good ones from 4K to 4M start.
. "$abs_top_srcdir/tests/functions.sh"

for v in 0 3 1000 2048 -1 1E abc 4097 64M; do
  expect_start_failure "cow-block-size=$v" --filter=cow memory 1M cow-block-size="$v"
done
for v in 4096 4K 64K 1M 4M 32M; do
  "$NBDKIT" -U - --filter=cow memory 1M cow-block-size="$v" \
    --run 'nbdinfo --size "$uri"' >/dev/null || fail "cow-block-size=$v refused"
done
