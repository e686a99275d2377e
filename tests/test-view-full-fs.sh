#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A view never makes a client's write fail on a full filesystem: four
# connections overwrite what a view keeps and write new blocks, more
# than the overlay's filesystem holds with the view but not without;
# every write succeeds, the view breaks, and the places it kept go back
# to the filesystem at once, before it is deleted: the statistics, the
# files' bytes, nbdcow view show and the filesystem agree.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 16 * M ))
mkdir "$tmp/small"
mount -t tmpfs -o size=12m tmpfs "$tmp/small" 2>/dev/null ||
  skip "cannot mount a small tmpfs here"
on_exit "umount '$tmp/small'"
stats=$tmp/stats.json ctl=$tmp/ctl
TMPDIR=$tmp/small start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
  cow-view-separator=@ cow-control="$ctl" cow-stats="$stats"
uri="nbd+unix:///?socket=$tmp/sock"
# used: the bytes the filesystem holds (a sanitizer's runtime may hold
# some of its own before nbdkit writes any).
used () { echo $(( $(stat -f -c '(%b - %f) * %S' "$tmp/small") )); }
before=$(used)
nbdsh -u "$uri" -c "h.pwrite(b'a' * (8 * $M), 0)"
"$NBDCOW" view create "$ctl" "" b1 >/dev/null

# Each connection overwrites 2M of the 8M the view keeps and writes
# 512K of new blocks past them, in 64K writes: 10M in all.
"$PYTHON" - "$uri" "$M" <<'PYEOF' || fail "see above"
import sys
import nbd
uri, M = sys.argv[1], int(sys.argv[2])
handles = []
for c in range(4):
    h = nbd.NBD()
    h.connect_uri(uri)
    handles.append(h)
failed = []
def done(c, offset):
    def cb(err):
        if err.value != 0:
            failed.append((c, offset, err.value))
        return 1
    return cb
for i in range(40):
    for c, h in enumerate(handles):
        if i < 32:
            offset = c * 2 * M + i * 65536
        else:
            offset = 8 * M + c * M // 2 + (i - 32) * 65536
        h.aio_pwrite(bytes([0x62 + c]) * 65536, offset,
                     completion=done(c, offset))
for h in handles:
    while h.aio_in_flight() > 0:
        h.poll(-1)
if failed:
    sys.exit('%d of 160 writes failed, the first %s' % (len(failed), failed[0]))
for c, h in enumerate(handles):
    assert h.pread(2 * M, c * 2 * M) == bytes([0x62 + c]) * (2 * M), c
    assert h.pread(M // 2, 8 * M + c * M // 2) == bytes([0x62 + c]) * (M // 2), c
PYEOF
show=$("$NBDCOW" view show "$ctl" "")
echo "$show" | grep -qx 'state: broken' || fail "the view did not break: $show"
echo "$show" | grep -qx 'kept_bytes: 0' || fail "the broken view keeps bytes: $show"
# The report is written at once when a client is served.
nbdinfo --size "$uri" >/dev/null
sleep 0.5
fs=$(( $(used) - before ))
files=$(jq .server.throwaway_bytes_on_disk "$stats")
used=$(jq .server.space.used "$stats")
echo "filesystem $fs, files $files, counted $used bytes"
[ "$files" -le $(( used + 256 * 1024 )) ] ||
  fail "the files hold $files bytes, more than the $used counted"
[ "$fs" -le $(( files + 256 * 1024 )) ] ||
  fail "the filesystem holds $fs bytes, more than the files' $files"
"$NBDCOW" view delete "$ctl" "" b1
