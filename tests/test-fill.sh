#!/usr/bin/env bash
# cow-fill copies the base's data into the overlay in the background,
# through the export's shared plugin handle: over a base of data runs
# and holes behind nbdkit's log filter, while a client writes, every
# data byte of the base is read once (fill and the client's
# read-modify-write together), holes never; the client's writes stay;
# the statistics say complete; afterwards reading the whole export
# reads nothing from the plugin.  cow-fill=/PATH waits while PATH is
# missing, and cow-fill without cow-base-handles is refused.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
truncate -s $(( 32 * M )) "$tmp/base"
for at in 0 5 12 31; do
  head -c $M /dev/urandom |
    dd of="$tmp/base" bs=$M seek=$at conv=notrunc 2>/dev/null
done
uri="nbd+unix:///?socket=$tmp/sock"
stats=$tmp/stats.json
start_nbdkit "$tmp/sock" --filter=cow --filter=log file "$tmp/base" \
  logfile="$tmp/log" cow-base-handles=1 cow-fill="$tmp/go" \
  cow-fill-rate=64M cow-stats="$stats"

# fill_is STATE: waits (up to 60 s) for the default export's fill.
fill_is ()
{
  for _ in $(seq 300); do
    [ "$(jq -r '.exports[0].fill.state' "$stats" 2>/dev/null)" = "$1" ] &&
      return 0
    sleep 0.2
  done
  fail "the fill is not $1: $(jq -c '.exports[0].fill' "$stats")"
}

# Writes before the fill runs, one into a data run it has not reached.
nbdsh -u "$uri" -c "
h.pwrite(b'w' * 4096, 12 * $M + 100)
h.pwrite(b'v' * 65536, 20 * $M)
"
fill_is paused
touch "$tmp/go"
fill_is complete
jq -e '.exports[0].fill | .filled_bytes == 33554432 and .to_go_bytes == 0
       and .error == null' "$stats" >/dev/null ||
  fail "fill statistics: $(jq -c '.exports[0].fill' "$stats")"

# Every data byte of the base read once, no hole read at all.
"$PYTHON" "$tests/base-reads.py" "$tmp/log" "$tmp/base" 0 ||
  fail "the base was not read once"

# The writes stay; the rest reads as the base; the plugin is not read.
reads_before=$(grep -c ' Read id=' "$tmp/log")
nbdsh -u "$uri" -c "
base = open('$tmp/base', 'rb').read()
want = bytearray(base)
want[12 * $M + 100:12 * $M + 4196] = b'w' * 4096
want[20 * $M:20 * $M + 65536] = b'v' * 65536
for at in range(0, len(want), $M):
    assert h.pread($M, at) == want[at:at + $M], 'MiB %d reads wrong' % (at // $M)
"
[ "$(grep -c ' Read id=' "$tmp/log")" -eq "$reads_before" ] ||
  fail "a read after the fill reached the plugin"
echo "the fill read each data byte once, kept the writes, and stands alone"

expect_start_failure "cow-fill=true: needs cow-base-handles=N" \
  --filter=cow file "$tmp/base" cow-fill=true
