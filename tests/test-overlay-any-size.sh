#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The throw-away overlays take disk space as they are written, on the
# default TMPDIR whatever its filesystem (ext4 stops files at 16 TiB):
# an 8 EiB disk takes writes at 20 TiB and at its last block; twenty
# exports of a 9 TiB disk writing 4 KiB each keep the server at one
# file per stripe, each about as long as the data written; an ended
# overlay gives its space back.
. "$abs_top_srcdir/tests/functions.sh"

echo "TMPDIR on $(stat -f -c %T "$tmp")"
start_nbdkit "$tmp/sock" --filter=cow memory 9223372036854775807 \
  cow-lifetime=clients:0
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c '
last = h.get_size() - 4096
for offset in [0, 20 * 2**40, last]:
    h.pwrite(b"%-4095d!" % offset, offset)
for offset in [0, 20 * 2**40, last]:
    assert h.pread(4096, offset) == b"%-4095d!" % offset, offset
assert h.pread(4096, 2**40) == bytes(4096)
'

# The lengths of the overlay files, measured while the clients hold
# their exports.
nbdsh -c "
import os
handles = []
for i in range(20):
    h = nbd.NBD()
    h.set_export_name('vm%d' % i)
    h.connect_unix('$tmp/sock')
    h.pwrite(b'%-4096d' % i, 9 * 2**40 - 4096 * (i + 1))
    assert h.pread(4096, 9 * 2**40 - 4096 * (i + 1)) == b'%-4096d' % i
    handles.append(h)
fds = '/proc/$(cat "$tmp/sock.pid")/fd/'
lengths = [os.stat(fds + fd).st_size for fd in os.listdir(fds)
           if 'nbdkit-cow-' in os.readlink(fds + fd)]
print(len(lengths), max(lengths))
" > "$tmp/lengths" || fail "exports at 9 TiB"
read -r files longest < "$tmp/lengths"
[ "$files" -eq 8 ] || fail "$files overlay files for 21 exports, not 8 (cow-stripes)"
[ "$longest" -gt 0 ] && [ "$longest" -le $(( 64 * 1024 * 1024 )) ] ||
  fail "the longest overlay file is $longest bytes for 84 KiB written"
echo "21 exports: 8 files, the longest $longest bytes"

# Every export has ended (grace 0): the space is given back.
for _ in $(seq 100); do
  [ "$(overlay_bytes "$tmp/sock")" -eq 0 ] && break
  sleep 0.1
done
[ "$(overlay_bytes "$tmp/sock")" -eq 0 ] ||
  fail "$(overlay_bytes "$tmp/sock") bytes still taken after every overlay ended"
