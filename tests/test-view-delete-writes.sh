#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Deleting a view that keeps old bytes holds no client's write: the
# deletion returns at once and its places go back in the background,
# punched block by block with the clients' changes running, shown by
# `nbdcow view show` as "giving-back" until they are all back.  A view
# keeping 128 MiB of a kept overlay and of a throw-away one is deleted
# while a client writes 4K at random: the kept one's deletion returns
# while its places still go back, writes complete while they do, the
# worst of them waits less than half the whole give-back where that
# takes half a second or more (with the gate closed over it, nearly
# all of it), and the kept file gives back the bytes (a throw-away
# store punches too fast for the timing to tell, but its punches run
# beside the writes here too, as the sanitizers see).
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
truncate -s $(( 256 * M )) "$tmp/base"
for store in kept throw-away; do
  args=()
  [ "$store" = kept ] && args=(cow-file="$tmp/ov.cow")
  rm -f "$tmp/ov.cow"
  serve_views "${args[@]}"
  view_keeping 128
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


def giving_back():
    show = subprocess.run([nbdcow, 'view', 'show', ctl, ''], check=True,
                          capture_output=True, text=True).stdout
    return 'state: giving-back' in show


w = threading.Thread(target=writer)
w.start()
time.sleep(0.3)
t0 = time.monotonic()
subprocess.run([nbdcow, 'view', 'delete', ctl, '', 'v'], check=True)
t1 = time.monotonic()
seen = giving_back()
while giving_back():
    time.sleep(0.01)
t2 = time.monotonic()
time.sleep(0.2)
stop.set()
w.join()
took, whole = t1 - t0, t2 - t0
worst = max(waited for _, waited in waits)
during = sum(t1 < done < t2 - 0.005 for done, _ in waits)
print('%s: view deleted in %.3f s, its places back in %.3f s (%s seen '
      'giving back); %d writes, %d completed while they went back, the '
      'worst waited %.3f s' % (store, took, whole, 'was' if seen else 'not',
                               len(waits), during, worst))
if store == 'kept' and not seen:
    sys.exit('the deletion returned only once its places were back')
sys.exit(0 if (whole < 0.5 or (during >= 3 and worst < whole / 2)) else 1)
PY
    fail "$store: the writes waited for the view's deletion"
  if [ "$store" = kept ]; then
    kib=$(du -k "$tmp/ov.cow" | cut -f1)
    [ "$kib" -lt $(( 256 * 1024 - 100 * 1024 )) ] ||
      fail "the kept file holds $kib KiB once the view's places went back"
  fi
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
done
echo "a view's deletion returns at once; no write waits for its give-back"
