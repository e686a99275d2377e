#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# No client write waits on a backup: a client writes 4K at random
# throughout nbdcow backup's whole cycles (a full backup, then an
# increment: the view made, read whole, deleted, its places going back
# in the background) of a kept overlay and of a throw-away one whose
# views keep what the writes overwrite.  No write waits a second (a
# generous bound: with the gate closed over the give-back a write
# waited as long as it, 1.3 s for 512 MiB).
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
truncate -s $(( 64 * M )) "$tmp/base"
for store in kept throw-away; do
  args=()
  [ "$store" = kept ] && args=(cow-file="$tmp/ov.cow")
  rm -f "$tmp/ov.cow" "$tmp"/*.qcow2
  serve_views "${args[@]}"
  nbdcopy -- [ nbdkit pattern $(( 64 * M )) ] "nbd+unix:///?socket=$tmp/sock"
  "$PYTHON" - "$tmp" "$NBDCOW" "$store" <<'PY' ||
import random, subprocess, sys, threading, time
import nbd

tmp, nbdcow, store = sys.argv[1:4]
sock = 'nbd+unix:///?socket=%s/sock' % tmp
h = nbd.NBD()
h.connect_uri(sock)
stop = threading.Event()
waits = []


def writer():
    rng = random.Random(2)
    while not stop.is_set():
        buf = rng.randbytes(4096)
        t = time.monotonic()
        h.pwrite(buf, rng.randrange(0, 64 * 256) * 4096)
        waits.append(time.monotonic() - t)


w = threading.Thread(target=writer)
w.start()
try:
    time.sleep(0.3)
    for name, base in (('full', []), ('inc', ['--base=full.qcow2'])):
        subprocess.run([nbdcow, 'backup'] + base +
                       ['%s/ctl' % tmp, sock, name, name + '.qcow2'],
                       cwd=tmp, check=True, stdout=subprocess.DEVNULL)
    while 'giving-back' in subprocess.run(
            [nbdcow, 'view', 'show', '%s/ctl' % tmp, ''], check=True,
            capture_output=True, text=True).stdout:
        time.sleep(0.05)
    time.sleep(0.2)
finally:
    stop.set()
    w.join()
print('%s: %d writes through two backups, the worst waited %.3f s'
      % (store, len(waits), max(waits)))
sys.exit(0 if max(waits) < 1.0 else 1)
PY
    fail "$store: a write waited a second or more on a backup"
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
done
echo "no client write waits on a backup's cycle"
