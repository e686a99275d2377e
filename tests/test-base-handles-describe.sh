#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Under cow-base-handles=2, clients connecting at once each get the
# description of an export whose stack interns it (nbdkit's gzip filter
# does).  nbdkit keeps what is interned in a context no connection owns
# in one list it does not lock, so the filter asks its shared contexts
# one at a time: else ThreadSanitizer reports the race.  One nbdsh
# connects eight clients at once, round after round.
. "$abs_top_srcdir/tests/functions.sh"
requires_filter gzip
requires_filter exportname

head -c 1048576 /dev/zero | gzip > "$tmp/disk.gz"
start_nbdkit "$tmp/sock" --filter=cow --filter=gzip --filter=exportname \
  file "$tmp/disk.gz" exportdesc=fixed:disk cow-base-handles=2
nbdsh -c "
uri = 'nbd+unix:///?socket=$tmp/sock'
want = 'expansion of gzip-compressed image: disk'
for round in range(30):
    hs = [nbd.NBD() for _ in range(8)]
    for h in hs:
        h.set_full_info(True)
        h.aio_connect_uri(uri)
    while not all(h.aio_is_ready() for h in hs):
        for h in hs:
            if h.aio_is_connecting():
                h.poll(0)
    for i, h in enumerate(hs):
        got = h.get_export_description()
        assert got == want, 'round %d, client %d: %r' % (round, i, got)
        h.shutdown()
print('240 clients, 8 at a time, each got the description')
"
