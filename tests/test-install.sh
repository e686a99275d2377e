#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# make install puts the filter, nbdcow and their man pages where they
# belong: the filter by default in the directory nbdkit searches for
# --filter=NAME.  Installed
# into a staging DESTDIR, the .so is ours (it advertises write zeroes);
# ./nbdkit runs it so that a sanitizer build gets its runtime.
. "$abs_top_srcdir/tests/functions.sh"

# A fresh make, not a child of the make running the tests: it must not
# inherit the jobserver or print directory messages into our output.
fresh_make () { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s "$@"; }
fresh_make -C "$abs_top_builddir" install DESTDIR="$tmp/inst" >/dev/null
filterdir=$(fresh_make -C "$abs_top_builddir" print-filterdir)
so=$tmp/inst$filterdir/nbdkit-cow-filter.so
[ -f "$so" ] || fail "no $so after make install"
[ ! -e "${so%.so}.la" ] || fail "libtool's .la installed beside the filter"
find "$tmp/inst" -name nbdkit-cow-filter.1 | grep -q . || fail "man page not installed"
find "$tmp/inst" -name nbdcow.1 | grep -q . || fail "nbdcow's man page not installed"
nbdcow=$(find "$tmp/inst" -path '*/bin/nbdcow')
[ -x "$nbdcow" ] || fail "nbdcow not installed"
"$nbdcow" --version | grep -q '^nbdcow ' || fail "the installed nbdcow does not run"
case $filterdir in
  "$(pkg-config --variable=filterdir nbdkit)") ;;
  *'/nbdkit/filters') echo "configured with --with-filterdir=$filterdir" ;;
  *) fail "filterdir $filterdir is not nbdkit's" ;;
esac
"$NBDKIT" -U - --filter="$so" memory 1M --run 'nbdinfo "$uri"' |
  grep -q 'can_zero: true' || fail "the installed filter is not ours"
