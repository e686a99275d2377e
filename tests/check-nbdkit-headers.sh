#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# make check-headers: an --enable-werror build judges only our code.
# nbdkit's headers of some versions warn under some compilers (nbdkit
# 1.33's nbdkit-filter.h trips -Wignored-qualifiers).  This stands up an
# nbdkit whose nbdkit-filter.h is the real one plus such a warning, in
# a prefix of its own (so that pkg-config gives -I for it, as for any
# nbdkit not installed in /usr), and builds the release tarball against
# it with --enable-werror: the build must pass, while the same header
# included with -I fails -Werror (so the header does warn).
#
# usage: tests/check-nbdkit-headers.sh TARBALL
set -euo pipefail
tarball=$(realpath "$1")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail () { echo "check-headers: FAIL: $*" >&2; exit 1; }

real=$(pkg-config --variable=includedir nbdkit)/nbdkit-filter.h
mkdir -p "$tmp/include" "$tmp/pkgconfig" "$tmp/build"
cat > "$tmp/include/nbdkit-filter.h" <<HEADER
#include "$real"
/* As nbdkit 1.33's header does: a qualifier on a return type. */
const int nbdkit_check_headers_warning (void);
HEADER
sed "s|^Cflags:.*|Cflags: -I$tmp/include|" \
  "$(pkg-config --variable=pcfiledir nbdkit)/nbdkit.pc" > "$tmp/pkgconfig/nbdkit.pc"

tar -C "$tmp/build" --strip-components=1 -xzf "$tarball"
cd "$tmp/build"

PKG_CONFIG_PATH="$tmp/pkgconfig" ./configure --enable-werror > configure.log ||
  fail "configure failed (configure.log)"

# The control: with -I the header's warning is an error.
if ${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -I. -Icommon -I"$tmp/include" \
     -fsyntax-only filters/cow/cow.c 2> "$tmp/control.log"; then
  fail "the test header does not warn with -I; this test proves nothing"
fi
grep -q 'ignored-qualifiers' "$tmp/control.log" ||
  fail "the control build failed for another reason: $(cat "$tmp/control.log")"

make V=1 filters/cow/nbdkit-cow-filter.la tools/nbdcow/nbdcow > make.log 2>&1 ||
  { tail -20 make.log; fail "the build with --enable-werror failed"; }
grep -q -- "-isystem $tmp/include" make.log ||
  fail "the filter was not compiled with nbdkit's headers as system headers"
echo "check-headers: --enable-werror builds against a warning nbdkit-filter.h"
