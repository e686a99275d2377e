#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Disk size costs neither memory nor start-up time: 1 PiB and 8 EiB
# (2^63-1 bytes, the memory plugin's maximum) bases start at once and,
# with the overlay on tmpfs, writes to the last block and the last byte
# read back while nbdkit stays well under 64 MiB.
. "$abs_top_srcdir/tests/functions.sh"

[ "$(stat -f -c %T /dev/shm)" = tmpfs ] || skip "/dev/shm is not tmpfs"
shm=$(mktemp -d /dev/shm/cow-test.XXXXXX)
on_exit "rm -rf '$shm'"

for size in $(( 1 << 50 )) 9223372036854775807; do
  sock=$tmp/sock-$size
  started=$(date +%s%N)
  TMPDIR=$shm start_nbdkit "$sock" --filter=cow memory "$size" cow-block-size=4K
  nbdinfo --size "nbd+unix:///?socket=$sock" >/dev/null
  ms=$(( ($(date +%s%N) - started) / 1000000 ))
  # Under valgrind or a sanitizer time and memory say nothing.
  if [ -z "${COW_VALGRIND_LOGDIR:-}${sanitizer_preload:-}" ]; then
    [ "$ms" -lt 5000 ] || fail "size $size: took $ms ms to serve"
  fi
  nbdsh -u "nbd+unix:///?socket=$sock" -c "
size = h.get_size()
assert size == $size
last_block = (size - 1) // 4096 * 4096
h.pwrite(b'L' * (size - last_block), last_block)
h.pwrite(b'Z', size - 1)
h.pwrite(b'M' * 100000, size // 2 - 50000)
assert h.pread(size - last_block, last_block) == b'L' * (size - last_block - 1) + b'Z'
assert h.pread(100000, size // 2 - 50000) == b'M' * 100000
assert h.pread(4096, 12345) == bytes(4096)
"
  rss=$(awk '/^VmHWM:/ { print $2 }' /proc/"$(cat "$sock.pid")"/status)
  if [ -z "${COW_VALGRIND_LOGDIR:-}${sanitizer_preload:-}" ]; then
    [ "$rss" -lt $(( 64 * 1024 )) ] || fail "size $size: nbdkit peaked at $rss KiB"
  fi
  echo "size $size: served in $ms ms, peak RSS $rss KiB"
done
