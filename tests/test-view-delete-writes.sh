#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Deleting a view that keeps old bytes holds no client's write for the
# whole give-back: its places are punched block by block with the
# clients' changes running.  A view keeping 128 MiB of a kept overlay
# and of a throw-away one is deleted while a client writes 4K at
# random: writes complete in the second half of the deletion, and
# where the deletion takes half a second or more (the kept one) the
# worst write waits less than half of it (with the gate closed over the
# whole give-back it waited nearly all of it; a throw-away store
# punches too fast for this to tell, but its punches run beside the
# writes here too, as the sanitizers see).
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
truncate -s $(( 256 * M )) "$tmp/base"
for store in kept throw-away; do
  args=()
  [ "$store" = kept ] && args=(cow-file="$tmp/ov.cow")
  rm -f "$tmp/ov.cow"
  serve_views "${args[@]}"
  nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "
import os
for _ in range(2):
    for at in range(0, 128 * $M, $M):
        h.pwrite(os.urandom($M), at)
    h.flush()
    if _ == 0:
        import subprocess
        subprocess.run(['$NBDCOW', 'view', 'create', '$tmp/ctl', '', 'v'],
                       check=True, stdout=subprocess.DEVNULL)
"
  "$PYTHON" - "$tmp/sock" "$NBDCOW" "$tmp/ctl" "$store" <<'PY' ||
import random, subprocess, sys, threading, time
import nbd

sock, nbdcow, ctl, store = sys.argv[1:5]
h = nbd.NBD()
h.connect_unix(sock)
stop = threading.Event()
waits = []                      # (completed, waited)


def writer():
    rng = random.Random(1)
    buf = bytes(4096)
    while not stop.is_set():
        t = time.monotonic()
        h.pwrite(buf, rng.randrange(0, 128 * 256) * 4096)
        waits.append((time.monotonic(), time.monotonic() - t))


w = threading.Thread(target=writer)
w.start()
time.sleep(0.3)
t0 = time.monotonic()
subprocess.run([nbdcow, 'view', 'delete', ctl, '', 'v'], check=True)
t1 = time.monotonic()
time.sleep(0.2)
stop.set()
w.join()
took, worst = t1 - t0, max(waited for _, waited in waits)
late = sum(t0 + took / 2 < done < t1 - 0.005 for done, _ in waits)
print('%s: view deleted in %.3f s; %d writes, %d completed in its second '
      'half, the worst waited %.3f s' % (store, took, len(waits), late, worst))
sys.exit(0 if late >= 3 and (took < 0.5 or worst < took / 2) else 1)
PY
    fail "$store: the writes waited for the view's deletion"
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
done
echo "no write waits for a view's whole deletion"
