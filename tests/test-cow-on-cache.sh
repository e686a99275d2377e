#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-on-cache=true copies cached ranges into the overlay; without it a
# cache request leaves the overlay alone.  Whether a range was copied
# shows by changing the base behind nbdkit's back (probe_base).
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 10M "$tmp/base"             # all hole in the base
for setting in true false; do
  start_nbdkit "$tmp/$setting" --filter=cow file "$tmp/base" \
    cow-on-cache=$setting
  uri="nbd+unix:///?socket=$tmp/$setting"
  nbdinfo "$uri" | grep -q 'can_cache: true' || fail "cache not advertised"
  nbdsh -u "$uri" -c 'h.cache(200000, 3000000)'
  got=$(probe_base "$uri" 3100000)
  case $setting in
    true) [ "$got" = copied ] || fail "cow-on-cache=true: cache copied nothing" ;;
    false) [ "$got" = base ] || fail "cow-on-cache=false: cache copied" ;;
  esac
done
