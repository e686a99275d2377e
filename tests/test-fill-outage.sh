#!/usr/bin/env bash
# Without cow-fill-retries the fill tries a failing source again
# without end, 1, 2, 4... seconds apart: past the 31 seconds that the
# five tries of a limit of 5 take, it is still running (its error and
# tries in the statistics, "try N" in the log).  test-fill-errors.sh
# shows it complete once the source is back.  31 seconds of waiting:
# the plain suite only.
. "$abs_top_srcdir/tests/functions.sh"
requires_filter error
instrumented && skip "31 seconds of retries: the plain suite only"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
stats=$tmp/stats.json
touch "$tmp/failing"
start_nbdkit "$tmp/sock" --filter=cow --filter=error file "$tmp/base" \
  error=EIO error-pread-rate=100% error-file="$tmp/failing" \
  cow-fill=true cow-fill-requests=1 cow-stats="$stats"
nbdinfo --size "nbd+unix:///?socket=$tmp/sock" >/dev/null
for _ in $(seq 450); do
  [ "$(jq -r '.exports[0].fill.retries' "$stats" 2>/dev/null)" -ge 6 ] 2>/dev/null &&
    break
  sleep 0.1
done
jq -e '.exports[0].fill | .state == "running" and .retries >= 6 and
       .error == "Input/output error"' "$stats" >/dev/null ||
  fail "the fill did not go on trying: $(jq -c '.exports[0].fill' "$stats")"
grep -q 'trying again in 32 s (try 6)' "$tmp/sock.err" ||
  fail "the sixth try is not in the log: $(grep cow-fill "$tmp/sock.err")"
