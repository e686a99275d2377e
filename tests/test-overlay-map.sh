#!/usr/bin/env bash
# The overlay is mapped into memory where it can be, and the map never
# turns a full filesystem into SIGBUS: blocks already in the overlay
# take stores through the map (writes, and zeros without trim) after
# the filesystem filled up.  Without a map (the fault shim refuses it)
# the same data round-trips through pread/pwrite.
. "$abs_top_srcdir/tests/functions.sh"

case ${sanitizer_preload:-} in
  *tsan*) expect_map="not mapped under ThreadSanitizer" ;;
  *) expect_map="overlay mapped, 104857600 bytes" ;;
esac

mkdir "$tmp/small"
mount -t tmpfs -o size=1m tmpfs "$tmp/small" 2>/dev/null ||
  skip "cannot mount a small tmpfs here"
on_exit "umount '$tmp/small'"

TMPDIR=$tmp/small start_nbdkit "$tmp/sock" -v --filter=cow pattern 100M
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c '
h.pwrite(b"a" * 65536, 0)
try:
    for i in range(1, 64):
        h.pwrite(b"b" * 65536, i * 1048576)
    assert False, "the overlay never filled"
except nbd.Error as e:
    assert e.errno in ("ENOSPC", "EIO"), e
# Block 0 is in the overlay: these go through the map.
h.pwrite(b"c" * 4096, 4096)
h.zero(4096, 8192, nbd.CMD_FLAG_NO_HOLE)
expected = b"a" * 4096 + b"c" * 4096 + bytes(4096) + b"a" * (65536 - 12288)
assert h.pread(65536, 0) == expected
'
grep -q "$expect_map" "$tmp/sock.err" || fail "no '$expect_map' in nbdkit's messages"

# Without a map: the shim refuses it (tests/overlay-faults.c).
shim=$abs_top_builddir/tests/.libs/overlay-faults.so
[ -f "$shim" ] || fail "no $shim"
NBDKIT_PRELOAD=$shim start_nbdkit "$tmp/sock2" -v --filter=cow pattern 100M
nbdsh -u "nbd+unix:///?socket=$tmp/sock2" -c '
h.pwrite(b"x" * 100000, 30000)
h.pwrite(b"y" * 10, 40000)
h.zero(5000, 50000, nbd.CMD_FLAG_NO_HOLE)
assert h.pread(100000, 30000) == (b"x" * 10000 + b"y" * 10 + b"x" * 9990 +
                                  bytes(5000) + b"x" * 75000)
'
grep -q "overlay not mapped" "$tmp/sock2.err" || fail "the shim did not stop the map"
