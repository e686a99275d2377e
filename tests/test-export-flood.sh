#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A client cannot exhaust the server with export names.  Under
# ulimit -n 1024, 5,000 new names each with a write, then 5,000
# NBD_OPT_INFO of new names, which nbdkit answers by opening the
# export (500 of each under valgrind or a sanitizer), against
# throw-away and kept overlays: the first cow-max-exports - 1 names get
# an overlay, the rest are refused with ENOENT; the default export,
# written before the flood, reads its data back after it and takes
# writes; descriptors grow by at most one per kept overlay and not at
# all for throw-away ones (their files are shared); refused names add
# no memory beyond what nbdkit itself keeps of them (measured in the
# same run on a control, nbdkit's exportname filter refusing the same
# names without a cow filter: nbdkit 1.44 keeps about the bytes of each
# name); nothing is created outside the overlay directory.
. "$abs_top_srcdir/tests/functions.sh"

ulimit -n 1024
max=128             # the default cow-max-exports
names=$(rounds 5000 500)

fds_of () { find /proc/"$(cat "$1.pid")"/fd -mindepth 1 | wc -l; }
rss_of () { awk '/^VmRSS:/ { print $2 }' /proc/"$(cat "$1.pid")"/status; }

# The control: what refusing the names costs nbdkit itself, in KiB (the
# system's nbdkit, neither under valgrind nor a sanitizer runtime).
"$system_nbdkit" -f -U "$tmp/csock" -P "$tmp/csock.pid" --filter=exportname \
  memory 64M exportname-strict=true exportname= 2>"$tmp/csock.err" &
on_exit "stop_nbdkit $! '$tmp/csock.err'"
for _ in $(seq 300); do [ -s "$tmp/csock.pid" ] && [ -S "$tmp/csock" ] && break; sleep 0.1; done
crss0=$(rss_of "$tmp/csock")
$PYTHON "$tests/export-flood.py" "$tmp/csock" info "$names" control >/dev/null
control=$(( $(rss_of "$tmp/csock") - crss0 ))
echo "control: refusing $names names grew nbdkit's RSS by $control KiB"

# flood SOCK MODE PREFIX SERVED: floods and checks how many were served.
flood ()
{
  out=$($PYTHON "$tests/export-flood.py" "$1" "$2" "$names" "$3")
  echo "$2 flood of $names names: $out"
  echo "$out" | jq -e ".served == $4 and .refused == $names - $4 and
                      (.errnos == [\"ENOENT\"])" >/dev/null ||
    fail "$2 flood: $out"
}

# check SOCK KIND EXTRA-FDS: the whole story against one server.
check ()
{
  sock=$1 kind=$2 extra_fds=$3
  uri="nbd+unix:///?socket=$sock"
  nbdsh -u "$uri" -c "h.pwrite(b'default before' * 100, 65536)"
  fds0=$(fds_of "$sock") rss0=$(rss_of "$sock")

  flood "$sock" go "$kind-go" $(( max - 1 ))
  fds1=$(fds_of "$sock") rss1=$(rss_of "$sock")
  flood "$sock" info "$kind-info" 0
  [ "$(nbdinfo --size "nbd+unix:///$kind-nbdinfo?socket=$sock" 2>&1)" != 67108864 ] ||
    fail "$kind: nbdinfo --size of a new name past the limit answered"
  fds2=$(fds_of "$sock") rss2=$(rss_of "$sock")
  echo "$kind: descriptors $fds0 -> $fds1 -> $fds2, RSS KiB $rss0 -> $rss1 -> $rss2"

  [ "$(nbdinfo --size "$uri")" = 67108864 ] || fail "$kind: default export gone"
  nbdsh -u "$uri" -c "
assert h.pread(1400, 65536) == b'default before' * 100
h.pwrite(b'default after', 0)
assert h.pread(13, 0) == b'default after'
" || fail "$kind: the default export after the flood"

  [ "$fds1" -le $(( fds0 + extra_fds )) ] ||
    fail "$kind: descriptors $fds0 -> $fds1 for $(( max - 1 )) overlays"
  [ "$fds2" -le "$fds1" ] || fail "$kind: refused names took descriptors"
  if ! instrumented; then
    [ "$rss1" -le $(( rss0 + 8192 )) ] ||
      fail "$kind: RSS grew by $(( rss1 - rss0 )) KiB for $(( max - 1 )) overlays"
    [ "$rss2" -le $(( rss1 + control + 1024 )) ] ||
      fail "$kind: RSS grew by $(( rss2 - rss1 )) KiB for refused names" \
           "($control KiB in nbdkit alone)"
  fi
}

# Throw-away overlays: the shared files are all the server keeps open.
start_nbdkit "$tmp/sock" --filter=cow memory 64M
check "$tmp/sock" throwaway 0
[ "$(overlay_fds "$tmp/sock" | wc -l)" -eq 8 ] ||
  fail "throw-away overlays hold $(overlay_fds "$tmp/sock" | wc -l) files, not 8"

# Kept overlays: one file each, all in the directory of cow-file.
mkdir "$tmp/kept"
touch "$tmp/marker"
# A name no other test's files have, so that the search below finds
# this server's files only.
kept=c.$(basename "$tmp").cow
start_nbdkit "$tmp/ksock" --filter=cow memory 64M cow-file="$tmp/kept/$kept"
check "$tmp/ksock" kept $(( max - 1 ))
[ "$(find "$tmp/kept" -type f | wc -l)" -eq "$max" ] ||
  fail "$(find "$tmp/kept" -type f | wc -l) kept files, not $max"
outside=$(find "$(dirname "$tmp")" /etc -maxdepth 4 -newer "$tmp/marker" \
            -name "$kept*" -not -path "$tmp/kept/*" 2>/dev/null | head -5)
[ -z "$outside" ] || fail "kept files outside the directory: $outside"
