#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The overlay lives in $TMPDIR, striped across cow-stripes files
# (default 8), each mode 0600, already unlinked, close-on-exec, and
# sparse: a write far into a big disk does not allocate what lies
# before it.
. "$abs_top_srcdir/tests/functions.sh"

# check_files SOCK N: the server on SOCK has N such overlay files.
check_files ()
{
  sock=$1 want=$2
  pid=$(cat "$sock.pid")
  nbdsh -u "nbd+unix:///?socket=$sock" -c 'h.pwrite(b"x" * 65536, 50 * 2**30)'
  found=$(overlay_fds "$sock")
  n=$(echo "$found" | grep -c .)
  [ "$n" -eq "$want" ] || fail "$n overlay files, not $want"
  for f in $found; do
    case "$(readlink "$f" 2>/dev/null)" in
      "$tmp/overlay/nbdkit-cow-"*" (deleted)") ;;
      *) fail "overlay file $f is not a deleted file in $tmp/overlay" ;;
    esac
    mode=$(stat -L -c %a "$f")
    [ "$mode" = 600 ] || fail "overlay mode is $mode, not 600"
    flags=$(awk '/^flags:/ { print $2 }' /proc/"$pid"/fdinfo/"${f##*/}")
    (( 8#$flags & 8#2000000 )) || fail "overlay is not close-on-exec (flags $flags)"
  done
  if ls -A "$tmp/overlay" | grep -q '^nbdkit-cow-'; then
    fail "an overlay file still has a name"
  fi
  bytes=$(overlay_bytes "$sock")
  (( bytes <= 1024 * 1024 )) || fail "overlay not sparse: $bytes bytes"
  echo "$n overlay files, mode 600, close-on-exec, $bytes bytes together"
}

mkdir "$tmp/overlay"
TMPDIR=$tmp/overlay start_nbdkit "$tmp/sock" --filter=cow memory 100G
check_files "$tmp/sock" 8
TMPDIR=$tmp/overlay start_nbdkit "$tmp/sock3" --filter=cow memory 100G cow-stripes=3
check_files "$tmp/sock3" 3
TMPDIR=$tmp/overlay start_nbdkit "$tmp/sock1" --filter=cow memory 100G cow-stripes=1
check_files "$tmp/sock1" 1
