#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-stats=FILE: a known sequence of requests gives exact counts of
# requests, blocks in each state, copy-ups and base reads, for each
# export, each export's own disk space, and the server's files, space
# and plugin opens, which stand once every overlay has ended; the file
# is rewritten while nbdkit runs and once more at exit; a request
# waiting behind a read-modify-write shows as a wait on rmw_locks; a
# file that cannot be written stops nbdkit at start.
. "$abs_top_srcdir/tests/functions.sh"

mkdir "$tmp/dir"
make_base "$tmp/dir/disk" $((4 * 1024 * 1024))      # 64 blocks of 64K
truncate -s 1M "$tmp/dir/odd\"name"
stats="$tmp/stats.json"

# stat_of EXPORT EXPR: the value of EXPR (Python, e as the export's
# entry) from the current file; "missing" if the export is not there.
stat_of ()
{
  $PYTHON -c "
import json, sys
r = json.load(open('$stats'))
es = [e for e in r['exports'] if e['name'] == sys.argv[1]]
print(eval(sys.argv[2], {'e': es[0], 'r': r}) if es else 'missing')" "$1" "$2"
}

# 1. Exact counts.
start_nbdkit "$tmp/sock" --filter=cow file dir="$tmp/dir" \
  cow-stats="$stats" cow-on-cache=true
[ -s "$stats" ] || fail "no statistics written at start"
nbdsh -c "
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri('nbd+unix:///disk?socket=$tmp/sock')
h.pwrite(b'a' * 65436, 100)          # fresh block 0 but 100 bytes: 1 rmw
h.pwrite(b'b' * 65536, 3 * 65536)    # whole block 3: no rmw
h.zero(4 * 65536, 4 * 65536)         # blocks 4-7 become holes
h.trim(2 * 65536, 20 * 65536)        # blocks 20-21 too
h.cache(2 * 65536, 10 * 65536)       # blocks 10-11 copied up
h.flush()
h.pread(8192, 0)                     # all from the overlay
h.block_status(65536, 0, lambda *args: 0)
"
nbdsh -c "h.connect_uri('nbd+unix:///odd%22name?socket=$tmp/sock')" \
  -c 'h.pread(512, 0)'

# Rewritten while running: the writes show within a few seconds.
for _ in $(seq 50); do
  [ "$(stat_of disk "e['requests']['write']['count']")" = 2 ] && break
  sleep 0.2
done
[ "$(stat_of disk "e['requests']['write']['count']")" = 2 ] ||
  fail "statistics not rewritten while running: $(cat "$stats")"
running_seconds=$(stat_of disk "r['seconds']")
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

expect ()
{
  got=$(stat_of "$1" "$2")
  [ "$got" = "$3" ] || fail "export '$1': $2 is $got, expected $3"
}
expect disk "r['seconds'] > $running_seconds" True
expect disk "e['block_size']" 65536
expect disk "e['blocks']" "{'base': 54, 'overlay': 4, 'zero': 6}"
expect disk "e['copy_ups']" \
  "{'cow_on_read': 0, 'cow_on_cache': 2, 'read_modify_write': 1}"
expect disk "e['base_reads']" "{'requests': 2, 'bytes': 131172}"
expect disk "e['partial_blocks']" 0
expect disk "[(k, v['count'], v['bytes']) for k, v in e['requests'].items()]" \
  "[('read', 1, 8192), ('write', 2, 130972), ('zero', 1, 262144), ('trim', 1, 131072), ('flush', 1, 0), ('cache', 1, 131072), ('extents', 1, 65536)]"
expect disk "e['overlay_files']" 8
expect disk "e['overlay_bytes_on_disk']" $((4 * 65536))   # its own 4 blocks
expect disk "r['server']['throwaway_files']" 8
expect disk "r['server']['throwaway_bytes_on_disk'] >= 4 * 65536" True
expect disk "r['server']['plugin_opens']" 2
expect disk "r['server']['space']['max']" None
expect disk "r['server']['space']['used'] >= 4 * 65536" True
expect disk "sorted(e['lock_waits'])" \
  "['base_map_lock', 'flush_lock', 'rmw_locks', 'state_lock', 'write_lock']"
expect 'odd"name' "e['requests']['read']" "{'count': 1, 'bytes': 512}"
expect 'odd"name' "e['blocks']" "{'base': 16, 'overlay': 0, 'zero': 0}"

# The man page's sample has the keys of a real report, no more, no less.
$PYTHON - "$abs_top_srcdir/docs/nbdkit-cow-filter.pod" "$stats" <<'PY' ||
import json, re, sys
pod = open(sys.argv[1]).read()
sample = re.search(r"\n( \{\n.*?\n \})\n", pod[pod.index("=head1 STATISTICS"):],
                   re.S).group(1)
def paths(v, at=""):
    if isinstance(v, dict):
        return {p for k, x in v.items() for p in paths(x, at + "." + k)} | {at}
    if isinstance(v, list):
        return {p for x in v[:1] for p in paths(x, at + "[]")} | {at}
    return {at}
want, got = paths(json.loads(sample)), paths(json.load(open(sys.argv[2])))
sys.exit("man page only: %s; report only: %s" % (sorted(want - got), sorted(got - want))
         if want != got else 0)
PY
  fail "the man page's sample differs from a report"

# 2. cow-on-read copies count as such.
rm "$stats"
start_nbdkit "$tmp/sock2" --filter=cow file "$tmp/dir/disk" \
  cow-stats="$stats" cow-on-read=true
nbdsh -u "nbd+unix:///?socket=$tmp/sock2" -c 'h.pread(100, 5 * 65536 + 10)'
stop_nbdkit "$(cat "$tmp/sock2.pid")" "$tmp/sock2.err"
expect "" "e['copy_ups']" \
  "{'cow_on_read': 1, 'cow_on_cache': 0, 'read_modify_write': 0}"
expect "" "e['base_reads']" "{'requests': 1, 'bytes': 65536}"

# 3. A write to a fresh block while another one reads the (slow) base
# for its read-modify-write waits on that block's rmw lock.
rm "$stats"
start_nbdkit "$tmp/sock3" --filter=cow --filter=delay file "$tmp/dir/disk" \
  rdelay=500ms cow-stats="$stats"
nbdsh -u "nbd+unix:///?socket=$tmp/sock3" -c '
c1 = h.aio_pwrite(b"1" * 512, 0)
c2 = h.aio_pwrite(b"2" * 512, 1024)
while h.aio_in_flight() > 0:
    h.poll(-1)
assert h.aio_command_completed(c1) and h.aio_command_completed(c2)
'
stop_nbdkit "$(cat "$tmp/sock3.pid")" "$tmp/sock3.err"
expect "" "e['lock_waits']['rmw_locks']['count']" 1
expect "" "e['lock_waits']['rmw_locks']['seconds'] >= 0.3" True
expect "" "e['copy_ups']['read_modify_write']" 1

# 4. Once its overlay has ended, the export is gone from the report,
# the server's figures stay: its space given back, its plugin open
# still counted.
rm "$stats"
start_nbdkit "$tmp/sock4" --filter=cow file "$tmp/dir/disk" \
  cow-stats="$stats" cow-lifetime=clients:0
nbdsh -u "nbd+unix:///?socket=$tmp/sock4" -c 'h.pwrite(b"x" * 65536, 0)'
for _ in $(seq 50); do
  [ "$(jq '.overlays.discarded' "$stats")" = 1 ] && break
  sleep 0.2
done
jq -e '.exports == [] and .overlays.discarded == 1 and
       .server.plugin_opens == 1 and .server.space.used == 0 and
       .server.throwaway_files == 8' "$stats" >/dev/null ||
  fail "no server figures once the overlay ended: $(cat "$stats")"
stop_nbdkit "$(cat "$tmp/sock4.pid")" "$tmp/sock4.err"

# 5. Refusals at start.
expect_start_failure "cow-stats=$tmp/nodir/s.json: cannot write" \
  --filter=cow memory 1M cow-stats="$tmp/nodir/s.json"
expect_start_failure "cow-stats=: must name a file" \
  --filter=cow memory 1M cow-stats=
