#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A refusal is seen however nbdkit is started: in the foreground (-f),
# in the background (a daemon) and under --run, a kept file that cannot
# be used gives the message and a non-zero status, and no client
# hangs.  A damaged file is refused at start, before nbdkit forks; a
# file made for another base size when the first client opens the
# default export (nbdkit opens no plugin without a client), which stops
# the server.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 10M "$tmp/base"
truncate -s 11M "$tmp/base11"
"$NBDKIT" -U - --filter=cow file "$tmp/base" cow-file="$tmp/ov" \
  --run 'nbdsh -u "$uri" -c "h.pwrite(b\"data\", 0); h.flush()"'
head -c 10000 "$tmp/ov" > "$tmp/damaged"      # cut inside its states

# A damaged file: refused before anything is served, in every mode.
for mode in foreground daemon run; do
  rm -f "$tmp/sock"
  case $mode in
    foreground) args=(-f -U "$tmp/sock") ;;
    daemon) args=(-U "$tmp/sock" -P "$tmp/pid") ;;
    run) args=(-U - --run 'nbdinfo --size "$uri"') ;;
  esac
  status=0
  timeout 60 "$NBDKIT" "${args[@]}" --filter=cow file "$tmp/base" \
    cow-file="$tmp/damaged" >"$tmp/out" 2>"$tmp/err" || status=$?
  [ "$status" -ne 0 ] && [ "$status" -ne 124 ] ||
    fail "$mode: a damaged file exited with $status"
  grep -q "cow-file=$tmp/damaged: truncated" "$tmp/err" ||
    fail "$mode: no message: $(cat "$tmp/err")"
  [ ! -s "$tmp/out" ] || fail "$mode: the command ran: $(cat "$tmp/out")"
  echo "damaged file, $mode: status $status, $(head -1 "$tmp/err")"
done

# Another base size, under --run: the command's client is refused, the
# status is not 0, the message is shown, nothing hangs.
status=0
timeout 60 "$NBDKIT" -U - --filter=cow file "$tmp/base11" cow-file="$tmp/ov" \
  --run 'nbdinfo --size "$uri"' >"$tmp/out" 2>"$tmp/err" || status=$?
[ "$status" -ne 0 ] && [ "$status" -ne 124 ] ||
  fail "--run with another base size exited with $status"
grep -q "cow-file=$tmp/ov: made for a base of 10485760 bytes" "$tmp/err" ||
  fail "--run: no message: $(cat "$tmp/err")"
echo "another base size, --run: status $status"

# Another base size, in the background: nbdkit has forked before any
# plugin could be asked (its own status is 0 then), the first client is
# refused at once, and the server stops.
rm -f "$tmp/sock" "$tmp/pid"
"$NBDKIT" -U "$tmp/sock" -P "$tmp/pid" --filter=cow file "$tmp/base11" \
  cow-file="$tmp/ov" || fail "the daemon did not start"
# The daemon writes its pid file after nbdkit's first process returns.
for _ in $(seq 300); do [ -s "$tmp/pid" ] && break; sleep 0.1; done
pid=$(cat "$tmp/pid")
on_exit "kill -9 $pid 2>/dev/null"
status=0
timeout 60 nbdinfo --size "nbd+unix:///?socket=$tmp/sock" \
  2>/dev/null || status=$?
[ "$status" -ne 0 ] || fail "the daemon served another base size"
[ "$status" -ne 124 ] || fail "the daemon's client hung"
for _ in $(seq 600); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$pid" 2>/dev/null && ! instrumented; then
  fail "the daemon still runs after refusing its kept file"
fi
echo "another base size, daemon: client refused, server stopped"
