#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The view torture of test-view-torture.sh on a kept overlay
# (cow-file): each view reads as the disk was at its instant while four
# connections write, zero and trim.  Once the views are deleted the
# space counted against cow-max-size is the blocks' and the file's
# metadata alone, as are the file's bytes on the filesystem.  Then
# kill -9 with a view alive over flushed writes (nbdcow info then
# counts what only the view kept, to give back), and after a view was
# deleted over writes not flushed: started again, the export reads as
# flushed (or, per 4K, as written since), the file's bytes are the
# blocks' alone (what only the view kept given back) and nbdcow check
# finds no error.  A clean stop with a view alive leaves no byte only
# the view kept.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 16 * 1024 * 1024 ))
ov=$tmp/ov.cow
stats=$tmp/stats.json
uri="nbd+unix:///?socket=$tmp/sock"
serve ()
{
  serve_views cow-file="$ov" cow-max-size=1G cow-stats="$stats"
  sleep 1.2
}
# The space counted, less the blocks' (65536 bytes and 16 of map
# each): the file's metadata.
metadata () { jq '.server.space.used - .exports[0].blocks.overlay * 65552' \
                "$stats"; }
# The file's bytes on disk, less the blocks' data and its metadata, with
# 256K for the filesystem's own blocks.
file_holds_blocks_alone ()
{
  jq -e --argjson on_disk "$(stat -c %b "$ov")" --argjson meta "$1" \
    '$on_disk * 512 <= .exports[0].blocks.overlay * 65536 + $meta + 262144' \
    "$stats" >/dev/null ||
    fail "$2: the file holds more than the blocks: $(du -B1 "$ov")," \
      "$(jq -c '.exports[0].blocks' "$stats")"
}

serve
meta=$(metadata)
pick_seed
"$PYTHON" "$tests/view-torture.py" "$tmp/sock" "$tmp/ctl" "$NBDCOW" \
  "$tmp/base" "$(rounds 12 4)" "$seed"
sleep 1.2
[ "$(metadata)" = "$meta" ] ||
  fail "space after the views: $(jq -c '[.server.space,
                                          .exports[0].blocks]' "$stats")"
file_holds_blocks_alone "$meta" "every view deleted"

# A view alive over writes into blocks it keeps, flushed, then kill -9.
"$NBDCOW" view create "$tmp/ctl" "" alive >/dev/null
write_random ()
{
  nbdsh -u "$uri" -c "
import random
rng = random.Random($1)
for _ in range(200):
    b = rng.randrange(256)
    h.pwrite(bytes([rng.randrange(1, 256)]) * 4096,
             b * 65536 + 4096 * rng.randrange(16))
for b in range(0, 256, 5):
    h.pwrite(bytes([rng.randrange(1, 256)]) * 65536, b * 65536)
if $2:
    h.flush()
"
}
write_random 1 True
nbdcopy "$uri" "$tmp/flushed"
kill -9 "$(cat "$tmp/sock.pid")"
sleep 0.2
# give_back: nbdcow info's bytes to give back.
give_back () { "$NBDCOW" info --json "$ov" | jq .bytes_to_give_back; }
[ "$(give_back)" -gt 0 ] ||
  fail "nbdcow info counts nothing only the view kept after kill -9"
serve
cmp "$tmp/flushed" <(nbdcopy "$uri" -) ||
  fail "after kill -9 the export does not read as flushed"
file_holds_blocks_alone "$meta" "started again after kill -9"

# A view made, writes that move what it keeps, not flushed, the view
# deleted, kill -9: each 4K reads as flushed or as written after.
"$NBDCOW" view create "$tmp/ctl" "" moved >/dev/null
nbdsh -u "$uri" -c 'h.flush()'
nbdcopy "$uri" "$tmp/flushed"
write_random 2 False
nbdcopy "$uri" "$tmp/written"
"$NBDCOW" view delete "$tmp/ctl" "" moved
kill -9 "$(cat "$tmp/sock.pid")"
sleep 0.2
serve
nbdcopy "$uri" "$tmp/after"
"$PYTHON" -c '
import sys
flushed, written, after = (open(f, "rb").read() for f in sys.argv[1:4])
for at in range(0, len(after), 4096):
    unit = after[at:at + 4096]
    if unit not in (flushed[at:at + 4096], written[at:at + 4096]):
        sys.exit("after kill -9 the 4K at %d reads as neither flushed "
                 "nor written" % at)
' "$tmp/flushed" "$tmp/written" "$tmp/after" || fail "a flushed write lost"
file_holds_blocks_alone "$meta" "started again after a view deleted"

# A clean stop with a view alive gives back what it kept.
"$NBDCOW" view create "$tmp/ctl" "" stopped >/dev/null
write_random 3 True
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
"$NBDCOW" check "$ov" >"$tmp/check" 2>&1 || fail "check: $(cat "$tmp/check")"
grep -q outside "$tmp/check" &&
  fail "a clean stop left what the view kept: $(cat "$tmp/check")"
[ "$(give_back)" -eq 0 ] ||
  fail "nbdcow info counts bytes to give back after a clean stop"
echo "views of a kept overlay read as at their instants; kill -9 with a" \
  "view alive left the export as flushed and the file its blocks alone"
