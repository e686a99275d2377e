#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A view never makes a client's write fail on a full filesystem: four
# connections overwrite what a view keeps, then new blocks are written,
# more than the overlay's filesystem holds with the view but not
# without; every write succeeds, the view breaks, and the places it
# kept go back to the filesystem at once, before it is deleted: the
# statistics, the files' bytes, nbdcow view show and the filesystem
# agree, to the byte.  At 64K blocks with whole-block writes, and at 1M
# blocks with unaligned ones, which a write that failed for want of
# room must not leave written in part in a place nothing holds; over a
# throw-away overlay and one kept in a file there.  Then a kept file's
# filesystem filled by another file while a state page it never wrote
# is dirty; and the room a view takes for a kept file's metadata given
# back.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
truncate -s $(( 32 * M )) "$tmp/base"
mkdir "$tmp/small"
stats=$tmp/stats.json ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
# used: the bytes the filesystem holds (a sanitizer's runtime may hold
# some of its own before nbdkit writes any).
used () { echo $(( $(stat -f -c '(%b - %f) * %S' "$tmp/small") )); }

# full BLOCK-SIZE FS-MB FIRST-MB TOTAL-MB UNALIGNED [kept]: FIRST-MB
# written, a view made, each of 4 connections overwrites a quarter of
# them, then new blocks up to TOTAL-MB; with kept, the overlay kept in
# a file on the small filesystem, the new blocks at the disk's end (so
# that their states lie in a page of the file not written before).
full ()
{
  local bs=$1 fs_mb=$2 first=$3 total=$4 unaligned=$5 kept=${6:-}
  local before show fs files store=() files_of=.server.throwaway_bytes_on_disk
  mount -t tmpfs -o size=${fs_mb}m tmpfs "$tmp/small" 2>/dev/null ||
    skip "cannot mount a small tmpfs here"
  on_exit "umount '$tmp/small' 2>/dev/null"
  rm -f "$tmp/sock" "$stats"
  if [ -n "$kept" ]; then
    store=(cow-file="$tmp/small/ov.cow")
    files_of=.exports[0].overlay_bytes_on_disk
  fi
  TMPDIR=$tmp/small start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
    cow-block-size="$bs" cow-view-separator=@ cow-control="$ctl" \
    cow-stats="$stats" "${store[@]}"
  before=$(used)
  "$PYTHON" - "$uri" "$M" "$first" "$total" "$unaligned" "$NBDCOW" "$ctl" \
    "${kept:+at-end}" <<'PYEOF' || fail "cow-block-size=$bs: see above"
import random, subprocess, sys, threading
import nbd
uri, M, first, total, unaligned, nbdcow, ctl, at_end = sys.argv[1:9]
M, first, total, unaligned = int(M), int(first), int(total), unaligned == '1'
model = bytearray(32 * M)
failed = []

def write(h, offset, data):
    try:
        h.pwrite(data, offset)
        model[offset:offset + len(data)] = data
    except nbd.Error as e:
        failed.append((offset, len(data), e.errno))

def overwrite(c):
    r = random.Random(c)
    for mb in range(c, first, 4):
        if not unaligned:
            write(handles[c], mb * M, r.randbytes(M))
            continue
        for k in range(10):     # 4-unit writes over the whole block
            write(handles[c], mb * M + 1 + k * 100000, r.randbytes(100000))

handles = []
for c in range(4):
    handles.append(nbd.NBD())
    handles[c].connect_uri(uri)
r = random.Random(99)
for mb in range(first):
    write(handles[mb % 4], mb * M, r.randbytes(M))
subprocess.run([nbdcow, 'view', 'create', ctl, '', 'b1'], check=True,
               stdout=subprocess.DEVNULL)
threads = [threading.Thread(target=overwrite, args=(c,)) for c in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
skip = 32 - total if at_end else 0
for mb in range(first, total):
    write(handles[mb % 4], (mb + skip) * M, r.randbytes(M))
if failed:
    sys.exit('%d writes failed, the first %s' % (len(failed), failed[0]))
if handles[0].pread(32 * M, 0) != model:
    sys.exit('the disk does not read as written')
PYEOF
  show=$("$NBDCOW" view show "$ctl" "")
  echo "$show" | grep -qx 'state: broken' ||
    fail "cow-block-size=$bs: the view did not break: $show"
  echo "$show" | grep -qx 'kept_bytes: 0' ||
    fail "cow-block-size=$bs: the broken view keeps bytes: $show"
  # A client served has the report written at once.
  nbdinfo --size "$uri" >/dev/null
  sleep 0.5
  fs=$(( $(used) - before ))
  files=$(jq "$files_of" "$stats")
  counted=$(jq .server.space.used "$stats")
  echo "cow-block-size=$bs: filesystem $fs, files $files, counted $counted bytes"
  [ "$files" -le "$counted" ] ||
    fail "cow-block-size=$bs: the files hold $files bytes, more than the $counted counted"
  [ "$fs" -eq "$files" ] ||
    fail "cow-block-size=$bs: the filesystem holds $fs bytes, the files $files"
  "$NBDCOW" view delete "$ctl" "" b1
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
  umount "$tmp/small"
}

full 64K 12 8 10 0
full 1M 24 14 22 1
full 64K 12 8 10 0 kept
full 1M 24 14 22 1 kept

# A kept file whose filesystem fills while a view lives, with a state
# page never written before dirty: the write that broke the view goes
# on, and the flush before the view's places go back finds its room
# (the view made allocated the metadata), so they do go back.
mount -t tmpfs -o size=8m tmpfs "$tmp/small" 2>/dev/null ||
  skip "cannot mount a small tmpfs here"
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-view-separator=@ \
  cow-control="$ctl" cow-file="$tmp/small/ov.cow"
nbdsh -u "$uri" -c "h.pwrite(b'a' * (2 * $M), 0); h.flush()"
"$NBDCOW" view create "$ctl" "" b2 >/dev/null
nbdsh -u "$uri" -c "h.pwrite(b'b' * $M, 0); h.pwrite(b'c' * 65536, 31 * $M)"
dd if=/dev/zero of="$tmp/small/filler" bs=64K 2>/dev/null || true
nbdsh -u "$uri" -c "
h.pwrite(b'd' * $M, $M)
assert h.pread(2 * $M, 0) == b'b' * $M + b'd' * $M
assert h.pread(65536, 31 * $M) == b'c' * 65536
" || fail "a client's write failed on a full filesystem under a kept view"
"$NBDCOW" view show "$ctl" "" | grep -qx 'state: broken' ||
  fail "the view did not break: $("$NBDCOW" view show "$ctl" "")"
# The file holds the blocks (2M and 64K) and its metadata (header and
# table 16K, states 8K, marks 4K), with 256K for the filesystem's own.
held=$(( $(stat -c %b "$tmp/small/ov.cow") * 512 ))
[ "$held" -le $(( 2 * M + 65536 + 28672 + 262144 )) ] ||
  fail "the broken view's places not given back: the file holds $held bytes"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
umount "$tmp/small"

# A view of a large disk's kept file takes the room of its metadata
# (12.5M for 40G) on a 16M filesystem: refused or deleted, it gives it
# back; live and keeping nothing, a write that finds no room breaks it
# and goes on.
mount -t tmpfs -o size=16m tmpfs "$tmp/small" 2>/dev/null ||
  skip "cannot mount a small tmpfs here"
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow null size=40G cow-view-separator=@ \
  cow-control="$ctl" cow-file="$tmp/small/big.cow"
nbdsh -u "$uri" -c "h.pwrite(b'a' * (2 * $M), 0); h.flush()"
"$NBDCOW" checkpoint create "$ctl" "" taken
before=$(used)
expect_exit 1 'checkpoint "taken" already' \
  "$NBDCOW" view create "$ctl" "" taken
[ "$(used)" -le $(( before + 65536 )) ] ||
  fail "a refused view left $(( $(used) - before )) bytes of the filesystem"
"$NBDCOW" view create "$ctl" "" b4 >/dev/null
"$NBDCOW" view delete "$ctl" "" b4
[ "$(used)" -le $(( before + 65536 )) ] ||
  fail "a deleted view left $(( $(used) - before )) bytes of the filesystem"
"$NBDCOW" view create "$ctl" "" b5 >/dev/null
nbdsh -u "$uri" -c "
for i in range(160):
    h.pwrite(b'b' * 65536, $M * 1024 + i * 65536)
h.flush()
" || fail "a client's write failed for the room a view of a kept file took"
"$NBDCOW" view show "$ctl" "" | grep -qx 'state: broken' ||
  fail "the view keeping nothing did not break: $("$NBDCOW" view show "$ctl" "")"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
umount "$tmp/small"

