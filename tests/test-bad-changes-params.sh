#!/usr/bin/env bash
# cow-changes-separator and cow-control refused at start, each message
# naming the parameter and its value: a separator that checkpoint names
# may hold or that the clones use, a control socket's path that is a
# file or longer than a socket's path can be.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 1M "$tmp/base"
for c in - . _; do
  expect_start_failure "cow-changes-separator=\\$c: checkpoint names may hold" \
    --filter=cow file "$tmp/base" cow-changes-separator="$c"
done
expect_start_failure "cow-changes-separator=@: the same as cow-clone-separator" \
  --filter=cow file "$tmp/base" cow-changes-separator=@ cow-clone-separator=@
expect_start_failure "cow-changes-separator=ab: must be one punctuation" \
  --filter=cow file "$tmp/base" cow-changes-separator=ab
touch "$tmp/plain"
expect_start_failure "cow-control=$tmp/plain: exists and is not a socket" \
  --filter=cow file "$tmp/base" cow-control="$tmp/plain"
long=$tmp/$(printf 'x%.0s' $(seq 120))
expect_start_failure "cow-control=$long: longer than a socket's path can be" \
  --filter=cow file "$tmp/base" cow-control="$long"
