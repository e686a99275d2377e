# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Sourced by the nbdcow tests of commit and export, after functions.sh:
# a base of random data with a hole ($tmp/base, 128 blocks of 64K), a
# kept overlay of it ($tmp/ov) holding writes, zeroes and trims of
# every shape, closed cleanly, and what clients saw ($tmp/live.img).

B=65536
make_base "$tmp/base" $((128 * B))
ov=$tmp/ov
uri="nbd+unix:///?socket=$tmp/sock"

start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "
import random
r = random.Random(7)
size = h.get_size()
for i in range(200):
    n = r.choice([1, 512, 4096, $B, 3 * $B + 17, 300000])
    off = r.randrange(size - n)
    op = r.random()
    if op < 0.7:
        h.pwrite(bytes([r.randrange(1, 256)]) * n, off)
    elif op < 0.85:
        h.zero(n, off)
    elif op < 0.95:
        h.zero(n, off, nbd.CMD_FLAG_NO_HOLE)
    else:
        h.trim(n, off)
"
nbdcopy "$uri" "$tmp/live.img"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
rm -f "$tmp/sock"
cmp -s "$tmp/live.img" "$tmp/base" && fail "the writes changed nothing"
"$NBDCOW" info "$ov"

# view_of BASE: the disk nbdkit serves from BASE through the overlay,
# copied into $tmp/view.img.
view_of ()
{
  start_nbdkit "$tmp/vsock" --filter=cow file "$1" cow-file="$ov"
  nbdcopy "nbd+unix:///?socket=$tmp/vsock" "$tmp/view.img"
  stop_nbdkit "$(cat "$tmp/vsock.pid")" "$tmp/vsock.err"
  rm -f "$tmp/vsock"
}
