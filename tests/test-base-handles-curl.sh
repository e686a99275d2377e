#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-base-handles=1 over nbdkit's curl plugin, against a local HTTP
# server with byte ranges: nbdcopy copies out with four connections
# through one curl handle, which asks the server for the disk's size
# once (each handle asks when it is opened), where the filter without
# the parameter opens a handle per client connection; the copy is the
# base.
. "$abs_top_srcdir/tests/functions.sh"
requires_plugin curl

mkdir "$tmp/www"
"$PYTHON" -c "
import sys
sys.stdout.buffer.write(b''.join(b'%015d\n' % i for i in range(1 << 19)))
" > "$tmp/www/base"
"$PYTHON" "$abs_top_srcdir/tests/http-range.py" "$tmp/www" "$tmp/port" &
on_exit "kill $!"
for _ in $(seq 100); do
  [ -s "$tmp/port" ] && break
  sleep 0.1
done
[ -s "$tmp/port" ] || fail "the HTTP server did not start"
url=http://127.0.0.1:$(cat "$tmp/port")/base

# opens HANDLES: copies the base out with cow-base-handles=HANDLES
# (none for "") and sets $count to how many handles asked for its size.
opens ()
{
  local sock=$tmp/sock$1
  : > "$tmp/www/.requests"
  start_nbdkit "$sock" --filter=cow curl "$url" ${1:+cow-base-handles=$1}
  nbdcopy --connections=4 --threads=4 "nbd+unix:///?socket=$sock" \
    "$tmp/out$1"
  cmp "$tmp/out$1" "$tmp/www/base" || fail "the copy differs, handles=$1"
  count=$(grep -c '^HEAD ' "$tmp/www/.requests" || true)
}

opens ""
per_connection=$count
opens 1
expect_one_shared "curl handles" "$per_connection" "$count"
