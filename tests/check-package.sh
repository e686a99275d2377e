#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# make check-package: the Debian package (debian/) builds from the
# release tarball, lintian finds no error in it, and installing it
# replaces the distribution's cow filter cleanly:
#   install  plain --filter=cow is ours (it advertises write zeroes),
#            the distribution's is diverted to --filter=cow-distrib;
#   remove   the distribution's filter and man page are back, unchanged;
#   install again, then purge: the same.
# Whatever happens, the machine is left as the test found it: the
# package purged, no diversion left, nbdkit's files as dpkg knows them.
#
# usage: tests/check-package.sh TARBALL
set -euo pipefail
export PATH=/usr/bin:/usr/sbin:/bin:/sbin:$PATH
tarball=$(realpath "$1")
pkg=nbdkit-cow
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
filter=/usr/lib/$arch/nbdkit/filters/nbdkit-cow-filter.so
manpage=/usr/share/man/man1/nbdkit-cow-filter.1.gz

fail () { echo "check-package: FAIL: $*" >&2; exit 1; }
say () { echo "check-package: $*"; }
installed () { dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'ok installed'; }

installed && fail "$pkg is installed already; this test would remove it"
[ -z "$(dpkg-divert --list "$pkg")" ] || fail "diversions of $pkg exist already"
dpkg --verify nbdkit || fail "nbdkit's files differ from its package already"

tmp=$(mktemp -d)
restore ()
{
  local status=$?
  if installed || dpkg-query -W "$pkg" >/dev/null 2>&1; then
    dpkg --purge "$pkg" >/dev/null || status=1
  fi
  [ -z "$(dpkg-divert --list "$pkg")" ] || { echo "diversions left" >&2; status=1; }
  dpkg --verify nbdkit || { echo "nbdkit's files not restored" >&2; status=1; }
  rm -rf "$tmp"
  exit $status
}
trap restore EXIT

# advertises_zero [FILTER]: does nbdkit with --filter=FILTER (default
# cow) advertise write zeroes?  Ours does, nbdkit 1.32's does not.
advertises_zero ()
{
  nbdkit -U - --filter="${1:-cow}" memory 1M --run 'nbdinfo "$uri"' > "$tmp/info" ||
    fail "nbdkit --filter=${1:-cow} did not start"
  grep -q 'can_zero: true' "$tmp/info"
}
distribution_filter_back ()
{
  advertises_zero && fail "--filter=cow is still ours after $1"
  [ -z "$(dpkg-divert --list "$pkg")" ] || fail "diversions left after $1"
  dpkg --verify nbdkit || fail "nbdkit's files are not as its package has them after $1"
  [ ! -e "${filter%-filter.so}-distrib-filter.so" ] || fail "diverted filter left after $1"
  zgrep -q cow-max-size "$manpage" && fail "our man page left after $1"
  say "after $1 the distribution's filter and man page are back"
}
ours_installed ()
{
  advertises_zero || fail "--filter=cow is not ours after $1"
  advertises_zero cow-distrib && fail "--filter=cow-distrib is not the distribution's"
  zgrep -q cow-max-size "$manpage" || fail "man nbdkit-cow-filter is not ours"
  command -v nbdcow > /dev/null || fail "nbdcow not installed"
  [ "$(dpkg-divert --list "$pkg" | wc -l)" = 2 ] || fail "expected 2 diversions"
  say "after $1 --filter=cow is ours, --filter=cow-distrib the distribution's"
}

say "building the package"
mkdir "$tmp/src"
tar -C "$tmp/src" --strip-components=1 -xzf "$tarball"
(cd "$tmp/src" && dpkg-buildpackage -b -us -uc) > "$tmp/build.log" 2>&1 ||
  { tail -30 "$tmp/build.log"; fail "dpkg-buildpackage failed"; }
deb=$(ls "$tmp"/${pkg}_*.deb)
changes=$(ls "$tmp"/${pkg}_*.changes)

say "lintian"
lintian --fail-on error "$changes" || fail "lintian reports errors"

v=$(nbdkit --version | awk '{ print $2 }')
depends=$(dpkg-deb -f "$deb" Depends)
case $depends in
  *"nbdkit (>= $v), nbdkit (<< $v.0~)"*) ;;
  *) fail "the package does not depend on nbdkit $v exactly: $depends" ;;
esac
say "depends on nbdkit $v: $depends"

advertises_zero && fail "--filter=cow is ours before the package is installed"
apt-get install -y -qq "$deb" > /dev/null || fail "installing $deb failed"
ours_installed install
apt-get remove -y -qq "$pkg" > /dev/null || fail "removing $pkg failed"
distribution_filter_back remove
apt-get install -y -qq "$deb" > /dev/null || fail "installing $deb again failed"
ours_installed "the second install"
apt-get purge -y -qq "$pkg" > /dev/null || fail "purging $pkg failed"
distribution_filter_back purge
say "PASS"
