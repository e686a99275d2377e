#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-fill fills each clone's overlay as it fills the default export's
# (cow-clone-separator=@): two clones of one image, each written by its
# client, and the default export all reach complete; each then reads
# the image with its own write over it, its plugin handles closed, and
# a new client of a clone makes no call of the plugin.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/golden" $(( 8 * M ))
stats=$tmp/stats.json
start_nbdkit "$tmp/sock" --filter=cow --filter=log file "$tmp/golden" \
  logfile="$tmp/log" cow-clone-separator=@ cow-fill=true cow-stats="$stats"
uri () { echo "nbd+unix:///$1?socket=$tmp/sock"; }

nbdsh -u "$(uri golden@a)" -c "h.pwrite(b'a' * 4096, 0)" -c "h.flush()"
nbdsh -u "$(uri golden@b)" -c "h.pwrite(b'b' * 4096, $M)" -c "h.flush()"
nbdinfo --size "$(uri '')" >/dev/null
for name in golden@a golden@b ""; do
  fill_state_is "$stats" complete "$name"
done

handles_closed "$tmp/log"
calls=$(plugin_calls "$tmp/log")
nbdsh -c "
golden = open('$tmp/golden', 'rb').read()
for name, at, byte in (('golden@a', 0, b'a'), ('golden@b', $M, b'b'),
                       ('', None, None)):
    c = nbd.NBD()
    c.connect_uri('nbd+unix:///%s?socket=$tmp/sock' % name)
    want = bytearray(golden)
    if at is not None:
        want[at:at + 4096] = byte * 4096
    assert c.pread(len(want), 0) == want, 'export %r reads wrong' % name
    c.shutdown()
"
no_plugin_call_since "$tmp/log" "$calls" "after the fills a client called the plugin"
echo "two clones and the default export filled, and stand alone"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
