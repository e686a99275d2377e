#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-base-handles=1 over the file plugin's dir=, whose exports are
# files by name: no client can crash the server.  Before nbdkit 1.44 a
# shared plugin handle is opened without an export name, on which
# file dir= crashes: the filter then opens the plugin per connection,
# said once at start as a notice.  A client asking for the default
# export (no file of that name) or a clone of it is refused alone;
# named exports and their clones are served, before and after.
. "$abs_top_srcdir/tests/functions.sh"

mkdir "$tmp/dir"
truncate -s 1M "$tmp/dir/disk1"
start_nbdkit "$tmp/sock" --filter=cow file dir="$tmp/dir" \
  cow-base-handles=1 cow-clone-separator=@
uri () { echo "nbd+unix:///$1?socket=$tmp/sock"; }

for name in '' '@x' disk1 '' disk1@y '@x'; do
  if nbdinfo --size "$(uri "$name")" > "$tmp/size" 2>"$tmp/client.err"; then
    case $name in
      ''|@*) fail "export \"$name\" served: no file has that name" ;;
    esac
    [ "$(cat "$tmp/size")" = 1048576 ] || fail "export \"$name\": size"
  else
    case $name in
      disk1*) fail "export \"$name\" refused: $(cat "$tmp/client.err")" ;;
    esac
  fi
  kill -0 "$(cat "$tmp/sock.pid")" 2>/dev/null ||
    fail "the server died after a client asked for \"$name\": $(cat "$tmp/sock.err")"
done
nbdsh -u "$(uri disk1)" -c 'h.pwrite(b"still here", 0)' \
  -c 'assert h.pread(10, 0) == b"still here"'

case $("$system_nbdkit" --version) in
  "nbdkit 1."[0-3][0-9].*|"nbdkit 1.4"[0-2].*|"nbdkit 1.43."[0-8])
    grep -q "notice: cow-base-handles=1: every connection opens the plugin itself" \
      "$tmp/sock.err" || fail "not said: $(cat "$tmp/sock.err")" ;;
esac
! grep -q 'error: cow-base-handles' "$tmp/sock.err" ||
  fail "a notice said as an error: $(cat "$tmp/sock.err")"
