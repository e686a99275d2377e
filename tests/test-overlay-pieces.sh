#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Every pwrite into the overlay ends on a 128K boundary of the file
# (storeio_write in filters/cow/storeio.c): large writes into fresh blocks
# then make small page-cache folios, which a guest whose free memory
# the host takes back fills 10x faster (docs/performance.md).
# tests/power-log.c logs the calls nbdkit makes on a kept
# overlay, whose data starts 64K into the file, so blocks are not
# aligned to pieces there; the data written must read back whole.
. "$abs_top_srcdir/tests/functions.sh"

shim=$abs_top_builddir/tests/.libs/power-log.so
[ -f "$shim" ] || fail "no $shim"
make_base "$tmp/base" $(( 8 * 1024 * 1024 ))
: > "$tmp/log"
NBDKIT_PRELOAD="$shim" COW_POWER_FILE="$tmp/ov" COW_POWER_LOG="$tmp/log" \
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
  cow-file="$tmp/ov" cow-block-size=64K

nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c '
import os
writes = [(0, os.urandom(1 << 20)),                   # whole blocks
          ((1 << 20) + 12345, os.urandom(3 << 20))]   # partial ends too
for offset, data in writes:
    h.pwrite(data, offset)
h.flush()
for offset, data in writes:
    assert h.pread(len(data), offset) == data, "data at %d" % offset
'

"$PYTHON" - "$tmp/log" <<'PY'
import struct, sys
RECORD = struct.Struct('=IIQQQ')        # tests/power-log.c
PWRITE, PIECE = 1, 128 * 1024
log = open(sys.argv[1], 'rb').read()
at, sizes = 0, []
while at < len(log):
    kind, mode, seq, offset, length = RECORD.unpack_from(log, at)
    at += RECORD.size
    if kind != PWRITE:
        continue
    at += length
    assert offset // PIECE == (offset + length - 1) // PIECE, \
        "pwrite of %d bytes at %d crosses a %d byte boundary" % (
            length, offset, PIECE)
    sizes.append(length)
assert sizes.count(PIECE) >= 20, "too few whole pieces: %s" % sizes
print("%d pwrites, none crossing a 128K boundary" % len(sizes))
PY
