#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-on-read=false leaves reads alone, true copies read blocks into
# the overlay, and /PATH does so only while PATH exists, switched while
# nbdkit runs.  Whether a read was copied shows by changing the base
# behind nbdkit's back (probe_base).  A copied block of data shows as
# data in the map; a copied block of zeros takes no overlay space.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 10M "$tmp/base"             # a hole but for 1M of data at 3M
head -c 1M /dev/urandom |
  dd of="$tmp/base" bs=1M seek=3 conv=notrunc status=none
read_then_probe ()
{
  nbdsh -u "$1" -c "h.pread(1000, $2)"
  probe_base "$1" "$2"
}

start_nbdkit "$tmp/off" --filter=cow file "$tmp/base" cow-on-read=false
uri="nbd+unix:///?socket=$tmp/off"
[ "$(read_then_probe "$uri" 0)" = base ] ||
  fail "cow-on-read=false copied a read of zeros"
[ "$(read_then_probe "$uri" $(( 3 * 1024 * 1024 )))" = base ] ||
  fail "cow-on-read=false copied a read of data"

start_nbdkit "$tmp/on" --filter=cow file "$tmp/base" cow-on-read=true
uri="nbd+unix:///?socket=$tmp/on"
[ "$(read_then_probe "$uri" $(( 1024 * 1024 )))" = copied ] ||
  fail "cow-on-read=true did not copy a read of zeros"
[ "$(read_then_probe "$uri" $(( 3 * 1024 * 1024 + 4096 )))" = copied ] ||
  fail "cow-on-read=true did not copy a read of data"
expect_extent "$uri" $(( 3 * 1024 * 1024 + 4096 )) data
[ "$(overlay_bytes "$tmp/on")" -le $(( 1024 * 1024 )) ] ||
  fail "a copied block of zeros took overlay space"

start_nbdkit "$tmp/path" --filter=cow file "$tmp/base" cow-on-read="$tmp/switch"
uri="nbd+unix:///?socket=$tmp/path"
[ "$(read_then_probe "$uri" $(( 5 * 1024 * 1024 )))" = base ] ||
  fail "cow-on-read=PATH copied while PATH was missing"
touch "$tmp/switch"
[ "$(read_then_probe "$uri" $(( 6 * 1024 * 1024 )))" = copied ] ||
  fail "cow-on-read=PATH did not copy once PATH existed"
rm "$tmp/switch"
[ "$(read_then_probe "$uri" $(( 7 * 1024 * 1024 )))" = base ] ||
  fail "cow-on-read=PATH still copied after PATH was removed"
