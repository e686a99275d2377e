#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# make install on a Debian system whose nbdkit has a cow filter: the
# system's filter and man page move aside (nbdkit --filter=cow-distrib
# still loads it), --filter=cow and man nbdkit-cow-filter reach ours, a
# second make install changes nothing of that, and make uninstall puts
# the system's back as it was.  The system is not touched: it all
# happens in a mount namespace of its own, /usr and dpkg's database
# under overlays whose changes land in $tmp.
. "$abs_top_srcdir/tests/functions.sh"

[ "$(id -u)" -eq 0 ] || skip "needs root for a mount namespace"
instrumented && skip "the system's nbdkit cannot load an instrumented filter"
command -v dpkg-divert >/dev/null || skip "not a Debian system"
command -v man >/dev/null || skip "no man"
fresh_make () { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s "$@"; }
filterdir=$(fresh_make -C "$abs_top_builddir" print-filterdir)
case $filterdir in
  /usr/*) ;;
  *) skip "the filter installs into $filterdir, outside /usr" ;;
esac
system_so=$filterdir/nbdkit-cow-filter.so
[ -f "$system_so" ] || skip "the system's nbdkit has no cow filter"
dpkg-query -S "$system_so" >/dev/null 2>&1 ||
  skip "$system_so is not Debian's"
unshare --mount true 2>/dev/null || skip "no mount namespaces here"

cat > "$tmp/inside.sh" <<'INSIDE'
set -eu
mkdir -p "$tmp"/usr.low "$tmp"/usr.up "$tmp"/usr.work "$tmp"/dpkg.up \
  "$tmp"/dpkg.work
mount --bind /usr "$tmp/usr.low"
mount -t overlay overlay -o \
  "lowerdir=$tmp/usr.low,upperdir=$tmp/usr.up,workdir=$tmp/usr.work" /usr
mount -t overlay overlay -o \
  "lowerdir=/var/lib/dpkg,upperdir=$tmp/dpkg.up,workdir=$tmp/dpkg.work" \
  /var/lib/dpkg
fresh_make () { env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s "$@"; }
fail () { echo "FAIL: $*" >&2; exit 1; }
# can_zero FILTER: whether nbdkit with --filter=FILTER advertises write
# zeroes: ours does, nbdkit's does not.
can_zero ()
{
  "$system_nbdkit" -U - --filter="$1" memory 1M --run 'nbdinfo "$uri"' |
    grep -q 'can_zero: true'
}
# ours_documented PAGE: whether the man page file PAGE is ours.
ours_documented () { zcat -f "$1" | grep -q cow-fill-rate; }
man_of () { PATH=/usr/bin:/usr/sbin man -w "$1" 2>/dev/null; }

cp "$system_so" "$tmp/system.so"
system_man=$(man_of nbdkit-cow-filter)
ours_documented "$system_man" && fail "$system_man is ours already"
can_zero cow && fail "the system's filter already advertises zeroes"
for round in 1 2; do
  fresh_make -C "$abs_top_builddir" install >/dev/null
  can_zero cow || fail "install $round: --filter=cow is not ours"
  can_zero cow-distrib && fail "install $round: --filter=cow-distrib is ours"
  cmp -s "$tmp/system.so" "${system_so%/*}/nbdkit-cow-distrib-filter.so" ||
    fail "install $round: the system's filter is not kept as cow-distrib"
  ours_documented "$(man_of nbdkit-cow-filter)" ||
    fail "install $round: man nbdkit-cow-filter shows $(man_of nbdkit-cow-filter)"
  page=$(man_of nbdkit-cow-distrib-filter) ||
    fail "install $round: no man page of the kept filter"
  ! ours_documented "$page" || fail "install $round: $page is ours"
done
echo "installed twice: --filter=cow and its man page are ours"
fresh_make -C "$abs_top_builddir" uninstall >/dev/null
cmp -s "$tmp/system.so" "$system_so" ||
  fail "uninstall: the system's filter is not back"
[ ! -e "${system_so%/*}/nbdkit-cow-distrib-filter.so" ] ||
  fail "uninstall: the kept filter is left behind"
[ "$(man_of nbdkit-cow-filter)" = "$system_man" ] ||
  fail "uninstall: man nbdkit-cow-filter shows $(man_of nbdkit-cow-filter)"
dpkg-divert --list | grep -q nbdkit-cow && fail "uninstall: a diversion is left"
# What the overlay holds differs from /usr as it was only in files
# moved and moved back.
left=$(cd "$tmp/usr.up" && find . -type f |
  while read -r f; do cmp -s "$f" "$tmp/usr.low/$f" || echo "$f"; done)
[ -z "$left" ] || fail "uninstall left files under /usr: $left"
echo "uninstalled: the system's filter and man page are back, nothing left"
INSIDE
tmp=$tmp system_so=$system_so \
  unshare --mount --propagation private bash "$tmp/inside.sh" ||
  fail "see above"
