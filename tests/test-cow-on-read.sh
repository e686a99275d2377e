#!/usr/bin/env bash
# cow-on-read=false leaves reads alone, true copies read blocks into
# the overlay, and /PATH does so only while PATH exists, switched while
# nbdkit runs.  A copied-up block shows as data in the map where the
# base has a hole.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 10M "$tmp/base"             # all hole in the base
read_then_map ()
{
  uri=$1 offset=$2
  nbdsh -u "$uri" -c "assert h.pread(1000, $offset) == bytes(1000)"
  extent_at "$uri" "$offset"
}

start_nbdkit "$tmp/off" --filter=cow file "$tmp/base" cow-on-read=false
[ "$(read_then_map "nbd+unix:///?socket=$tmp/off" 0)" = "hole,zero" ] ||
  fail "cow-on-read=false copied a read"

start_nbdkit "$tmp/on" --filter=cow file "$tmp/base" cow-on-read=true
[ "$(read_then_map "nbd+unix:///?socket=$tmp/on" 0)" = data ] ||
  fail "cow-on-read=true did not copy a read"

start_nbdkit "$tmp/path" --filter=cow file "$tmp/base" cow-on-read="$tmp/switch"
uri="nbd+unix:///?socket=$tmp/path"
[ "$(read_then_map "$uri" 0)" = "hole,zero" ] ||
  fail "cow-on-read=PATH copied while PATH was missing"
touch "$tmp/switch"
[ "$(read_then_map "$uri" $(( 1024 * 1024 )))" = data ] ||
  fail "cow-on-read=PATH did not copy once PATH existed"
rm "$tmp/switch"
[ "$(read_then_map "$uri" $(( 5 * 1024 * 1024 )))" = "hole,zero" ] ||
  fail "cow-on-read=PATH still copied after PATH was removed"
expect_extent "$uri" 0 "hole,zero"
