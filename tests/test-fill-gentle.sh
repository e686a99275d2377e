#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Clients first: while a client is connected and reading the plugin, the
# fill keeps a single read of 64 KiB in flight, whatever
# cow-fill-requests, so that a client's read shares the source with that
# one small read at most; half a second after the client's last read
# of the plugin the fill is back to its reads of 256 KiB.  Over a slow
# source (nbdkit's delay filter) whose reads nbdkit's log filter
# records: the client's through its plugin handle, the fill's through
# its own.
. "$abs_top_srcdir/tests/functions.sh"
requires_filter delay
# Half a second is the test's measure: under valgrind a client's read
# of nbdkit can take longer than that, and the fill is then rightly back
# to its large reads between two of them.
[ -z "${COW_VALGRIND_LOGDIR:-}" ] ||
  skip "a measure of half a second: not under valgrind"

uri="nbd+unix:///?socket=$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow --filter=log --filter=delay \
  pattern 1G logfile="$tmp/log" rdelay=5ms cow-fill=true

# A client reads the plugin every 20 ms for a second, then leaves.
pick_seed
nbdsh -u "$uri" -c "
import random, time
random.seed($seed)
end = time.monotonic() + 1
while time.monotonic() < end:
    h.pread(4096, random.randrange(1 << 30) & ~4095)
    time.sleep(0.02)
"
for _ in $(seq 50); do
  grep -q 'Read id=[0-9]* offset=0x[0-9a-f]* count=0x40000 ' "$tmp/log" &&
    break
  sleep 0.2
done

"$PYTHON" - "$tmp/log" <<'PY' || fail "the fill did not give way: see above"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
conns = [m.group(1) for m in (re.search(r'connection=(\d+) Connect ', l)
                              for l in lines) if m]
assert len(conns) == 2, 'want a handle for the client and the fill: %s' % conns
client, fill = conns
last_client = max(i for i, l in enumerate(lines)
                  if 'connection=%s ...Read ' % client in l)
in_flight, gentle, full = set(), 0, 0
for i, l in enumerate(lines):
    m = re.search(r'connection=%s Read id=(\d+) offset=\S+ count=(0x[0-9a-f]+)'
                  % fill, l)
    r = re.search(r'connection=%s \.\.\.Read id=(\d+) ' % fill, l)
    if r:
        in_flight.discard(r.group(1))
    if not m:
        continue
    count = int(m.group(2), 16)
    if i < last_client:
        assert count <= 65536, 'a fill read of %d bytes beside the client' % count
        assert not in_flight, 'two fill reads at once beside the client: %s' % l
        gentle += 1
    elif count == 262144:
        full += 1
    in_flight.add(m.group(1))
assert gentle > 0, 'the fill did not read beside the client'
assert full > 0, 'the fill did not go back to reads of 256 KiB'
print('beside the client: %d fill reads, one at a time, of 64 KiB at most; '
      'then %d of 256 KiB' % (gentle, full))
PY
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
