#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# make check-nbdkit-version: configure never mixes two nbdkits.  An
# nbdkit installed in a prefix of its own, whose nbdkit.pc has an empty
# Cflags (as nbdkit 1.44's has), is stood up here as a copy of this
# machine's headers claiming another version, with an nbdkit that says
# it is that version.  configure must take the headers from the .pc
# file's includedir; and with an nbdkit of another version than those
# headers it must fail, naming both versions.
#
# usage: tests/check-nbdkit-version.sh TARBALL
set -euo pipefail
tarball=$(realpath "$1")
tmp=$(mktemp -d)
trap "rm -rf \"$tmp\"" EXIT
fail () { echo "check-nbdkit-version: FAIL: $*" >&2; exit 1; }

system_nbdkit=$(command -v nbdkit || echo /usr/sbin/nbdkit)
system_version=$("$system_nbdkit" --version | awk '{ print $2 }')
other=1.99.7
[ "$system_version" != "$other" ] || other=1.99.8
prefix=$tmp/opt
mkdir -p "$prefix/include" "$prefix/lib/pkgconfig" "$prefix/sbin" "$tmp/build"
cp "$(pkg-config --variable=includedir nbdkit)"/nbdkit-*.h "$prefix/include/"
IFS=. read -r major minor micro <<< "$other"
sed -i -e "s/^#define NBDKIT_VERSION_MAJOR .*/#define NBDKIT_VERSION_MAJOR $major/" \
       -e "s/^#define NBDKIT_VERSION_MINOR .*/#define NBDKIT_VERSION_MINOR $minor/" \
       -e "s/^#define NBDKIT_VERSION_MICRO .*/#define NBDKIT_VERSION_MICRO $micro/" \
       -e "s/^#define NBDKIT_VERSION_STRING .*/#define NBDKIT_VERSION_STRING \"$other\"/" \
       "$prefix/include/nbdkit-version.h"
cat > "$prefix/lib/pkgconfig/nbdkit.pc" <<PC
prefix=$prefix
includedir=\${prefix}/include
filterdir=\${prefix}/lib/nbdkit/filters

Name: nbdkit
Version: $other
Description: A toolkit for creating NBD servers
Cflags:
Libs:
PC
# It runs as the system's nbdkit does, a program of the same loader
# (configure asks ldd which), but says it is the other version.
cat > "$tmp/fake-nbdkit.c" <<C
#include <stdio.h>
#include <string.h>
#include <unistd.h>
int
main (int argc, char **argv)
{
  if (argc == 2 && strcmp (argv[1], "--version") == 0) {
    puts ("nbdkit $other");
    return 0;
  }
  execv ("$system_nbdkit", argv);
  return 127;
}
C
${CC:-cc} -o "$prefix/sbin/nbdkit" "$tmp/fake-nbdkit.c"

tar -C "$tmp/build" --strip-components=1 -xzf "$tarball"
cd "$tmp/build"

PKG_CONFIG_PATH="$prefix/lib/pkgconfig" ./configure \
  NBDKIT="$prefix/sbin/nbdkit" > configure.log 2>&1 ||
  { tail -5 configure.log; fail "configure refused a matching nbdkit"; }
grep -q "^NBDKIT_CFLAGS = .*-isystem $prefix/include" Makefile ||
  fail "the headers were not taken from the .pc file's includedir"
grep -q "the version of nbdkit's headers\.\.\. $other" configure.log ||
  fail "configure did not read the headers' version $other"
make filters/cow/nbdkit-cow-filter.la > make.log 2>&1 ||
  { tail -20 make.log; fail "the filter did not build"; }

if PKG_CONFIG_PATH="$prefix/lib/pkgconfig" ./configure \
     NBDKIT="$system_nbdkit" > mixed.log 2>&1; then
  fail "configure took nbdkit $other's headers for nbdkit $system_version"
fi
grep "error:" mixed.log | grep -q "nbdkit $other.*nbdkit $system_version" ||
  fail "the refusal does not name both versions: $(grep error: mixed.log)"
echo "check-nbdkit-version: headers from includedir; nbdkit $other's headers refused for nbdkit $system_version"
