#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-base-handles=1: an error of the shared plugin handle reaches the
# client whose request met it, and a later request calls the plugin
# again.  nbdkit's error filter under the filter fails every read of
# the plugin while a file exists: two clients' reads fail with EIO,
# and once the file is gone both read the base through the same
# handle, never opened again.  With nbdkit's retry filter between the
# two, a read that fails is retried through the handle the retry
# filter reopens below, and succeeds once the file is gone.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 1M "$tmp/base"
printf 'base data' | dd of="$tmp/base" conv=notrunc status=none

touch "$tmp/inject"
start_nbdkit "$tmp/sock" --filter=cow --filter=log --filter=error \
  file "$tmp/base" cow-base-handles=1 logfile="$tmp/log" \
  error-pread-rate=1 error-pread-file="$tmp/inject"
nbdsh -c "$EXPECT_EIO" -c "$BY_NAME" -c "
sock = '$tmp/sock'
a, b = conn(sock, ''), conn(sock, '')
expect_eio('a read by the first client', lambda: a.pread(9, 0))
expect_eio('a read by the second client', lambda: b.pread(9, 0))
os.unlink('$tmp/inject')
assert a.pread(9, 0) == b'base data'
assert b.pread(9, 0) == b'base data'
assert conn(sock, '').pread(9, 0) == b'base data'
" || fail "errors of the shared handle"
[ "$(grep -c 'Connect export=' "$tmp/log")" -eq 1 ] ||
  fail "the shared handle was opened $(grep -c 'Connect export=' "$tmp/log") times"

# The retry filter reopens its own plugin handle under the shared one.
touch "$tmp/inject2"
start_nbdkit "$tmp/sock2" --filter=cow --filter=retry --filter=log \
  --filter=error file "$tmp/base" cow-base-handles=1 retries=20 \
  retry-delay=1 logfile="$tmp/log2" error-pread-rate=1 \
  error-pread-file="$tmp/inject2"
( sleep 2; rm "$tmp/inject2" ) &
remover=$!
nbdsh -c "
h = nbd.NBD()
h.connect_unix('$tmp/sock2')
assert h.pread(9, 0) == b'base data'
" || fail "a read through the retry filter under the shared handle"
wait "$remover"
opens=$(grep -c 'Connect export=' "$tmp/log2")
echo "the retry filter opened the plugin $opens times"
[ "$opens" -ge 2 ] || fail "the retry filter did not reopen"
