#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A clone is never refused while an overlay past its grace holds the
# place it needs: under cow-lifetime=clients:0 cow-max-exports=2, 1000
# clones one after another, each writing 4K and hanging up, are all
# served at once, though nbdkit may close a connection some time after
# its client left.
. "$abs_top_srcdir/tests/functions.sh"

clones=$(rounds 1000 100)
start_nbdkit "$tmp/sock" --filter=cow pattern 16M \
  cow-lifetime=clients:0 cow-max-exports=2 cow-clone-separator=@
nbdsh -c "
refused = []
for i in range($clones):
    h = nbd.NBD()
    h.set_export_name('@c%d' % i)
    try:
        h.connect_unix('$tmp/sock')
    except nbd.Error as e:
        refused.append(i)
        continue
    h.pwrite(b'x' * 4096, 4096 * (i % 64))
    h.shutdown()
assert not refused, '%d of $clones refused, first @c%d' % (len(refused), refused[0])
"
