#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The changes view (cow-changes-separator): over a base with holes,
# after runs of writes, zeroes and trims, NAME+ reports exactly the
# blocks the overlay holds as data, those zeroed or trimmed as zero and
# the rest as a hole that is not zero (nbdinfo --map); it reads as the
# export reads, refuses writes and copies nothing up under cow-on-read.
# qemu-img convert -B base of the view is a qcow2 diff identical to the
# export over the base, for which the filter read the overlay's
# changed bytes only, nothing of the base (cow-stats).
. "$abs_top_srcdir/tests/functions.sh"

block=65536
size=$(( 64 * 1024 * 1024 ))
make_base "$tmp/base" "$size"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
  cow-changes-separator=+ cow-on-read=true cow-stats="$tmp/stats.json"
live="nbd+unix:///?socket=$tmp/sock"
view="nbd+unix:///+?socket=$tmp/sock"

# The changes, and the map they must give: each run as [offset, length,
# type], "data" or "zero": data in whole blocks, but in 4K sectors
# where a write covers part of a block over base data (the overlay
# holds only those).
nbdsh -u "$live" -c '
import json
B = '"$block"'
M = 1024 * 1024
expected = []
def data(offset, length, what, grain=B):
    h.pwrite(what * length, offset)
    expected.append([offset // grain * grain,
                     (offset + length + grain - 1) // grain * grain, "data"])
def zero(offset, length, trim):
    if trim:
        h.trim(length, offset)
    else:
        h.zero(length, offset)
    expected.append([offset, offset + length, "zero"])
data(1 * M, 3 * B, b"a")                 # in the base data
data(5 * M + 100, 1000, b"b", 4096)      # a partial block, over data
data(22 * M, 2 * B, b"c")                # in the base hole
data(30 * M + 7, B, b"d")                # two partial blocks, in the hole
zero(8 * M, 4 * B, False)                # zeroes over data
zero(24 * M, 2 * B, False)               # over the hole
zero(50 * M, 3 * B, True)                # a trim
h.zero(B, 40 * M, nbd.CMD_FLAG_NO_HOLE)  # zeroes kept allocated: data
expected.append([40 * M, 40 * M + B, "data"])
h.flush()
json.dump(sorted(expected), open("'"$tmp"'/expected.json", "w"))
'

# A read through the view copies nothing up (cow-on-read is for the
# export's own clients).
nbdsh -u "$view" -c 'h.pread(65536, 60 * 1024 * 1024)'

nbdinfo --map --json "$view" > "$tmp/map.json"
"$PYTHON" - "$tmp/map.json" "$tmp/expected.json" "$size" <<'PY' ||
import json, sys
got = json.load(open(sys.argv[1]))
want = json.load(open(sys.argv[2]))
size = int(sys.argv[3])
kinds = []
for start, end, kind in want:
    kinds.append((start, end, {"data": 0, "zero": 3}[kind]))
pos, runs = 0, []
for start, end, t in sorted(kinds):
    if pos < start:
        runs.append((pos, start, 1))
    runs.append((start, end, t))
    pos = end
if pos < size:
    runs.append((pos, size, 1))
merged = []
for r in runs:
    if merged and merged[-1][2] == r[2] and merged[-1][1] == r[0]:
        merged[-1] = (merged[-1][0], r[1], r[2])
    else:
        merged.append(r)
have = [(e["offset"], e["offset"] + e["length"], e["type"]) for e in got]
if have != merged:
    print("map of the view:", have, "\nexpected:", merged)
    sys.exit(1)
PY
  fail "the view's map is not the changes"
echo "the view's map lists exactly the changed blocks"

# Read-only: a write is refused.
nbdsh -u "$view" -c '
assert h.is_read_only()
try:
    h.pwrite(b"x" * 512, 0)
    raise AssertionError("a write to the view succeeded")
except nbd.Error:
    pass
'

# The reads the diff costs, from the statistics of one second later.
stats_reads ()
{
  sleep 1.2
  "$PYTHON" -c 'import json, sys
e = [e for e in json.load(open(sys.argv[1]))["exports"] if e["name"] == ""][0]
print(e["requests"]["read"]["bytes"], e["base_reads"]["bytes"], e["copy_ups"]["cow_on_read"])' \
    "$tmp/stats.json"
}
read before_read before_base before_copy <<< "$(stats_reads)"
qemu-img convert -f raw -O qcow2 -B "$tmp/base" -F raw "$view" "$tmp/diff.qcow2"
read after_read after_base after_copy <<< "$(stats_reads)"
changed=$("$PYTHON" -c 'import json, sys
print(sum(e - s for s, e, k in json.load(open(sys.argv[1])) if k == "data"))' \
  "$tmp/expected.json")
read_bytes=$(( after_read - before_read ))
echo "the diff read $read_bytes bytes of the overlay for $changed changed," \
  "$(( after_base - before_base )) of the base"
[ "$read_bytes" -le "$changed" ] ||
  fail "qemu-img convert read $read_bytes bytes for $changed changed"
[ "$after_base" -eq "$before_base" ] || fail "the diff read the base"
[ "$after_copy" -eq 0 ] || fail "a read of the view copied blocks up"

qemu-img compare "$tmp/diff.qcow2" "$live" ||
  fail "the diff over the base is not the export"
