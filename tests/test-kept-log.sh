#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A kept overlay of format version 7 on makes a flush durable in one
# sync, whatever it makes durable (docs/overlay-format.md, "The log"):
# counted with strace, 4K and 64K writes into new space, sequential
# and random, each followed by a flush, cost at most 1.05 syncs a
# flush and at least one, with a checkpoint, so that each flush makes marks durable
# too (version 8: in the record).  After kill -9 the log holds their records, which nbdcow reads
# and the next start folds into the state pages.  The last record is
# kept only if the data it names is what it was (a crash cut off its
# sync: its data in the file zeros), and only whole (a record torn by a
# crash, its second sector never written): nbdcow info reports the
# blocks dropped, and the block reads from the base again.
. "$abs_top_srcdir/tests/functions.sh"
requires_plugin file
command -v strace >/dev/null || skip "no strace"

ov=$tmp/ov
uri="nbd+unix:///?socket=$tmp/sock"
B=65536
head -c $((64 * 1024 * 1024)) /dev/urandom > "$tmp/base"
serve ()
{
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$1" \
    cow-control="$tmp/ctl"
}
stop () { stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"; rm -f "$tmp/sock"; }
kill9 ()
{
  pid=$(cat "$tmp/sock.pid")
  kill -9 "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.1; done
  rm -f "$tmp/sock"
}
info () { "$NBDCOW" info --json "$1" | jq -r "$2"; }

# syncs SCRIPT: the syncs of the served overlay while nbdsh runs SCRIPT.
syncs ()
{
  strace -f -qq -c -o "$tmp/counts" -e trace=fdatasync,fsync \
    -p "$(cat "$tmp/sock.pid")" &
  spid=$!
  sleep 1
  nbdsh -u "$uri" -c "$1"
  kill -INT "$spid"
  wait "$spid" || true
  awk '$NF == "fdatasync" || $NF == "fsync" { n += $4 } END { print n + 0 }' \
    "$tmp/counts"
}

# Syncs: each workload from a fresh file, N writes each flushed.
N=200
for w in "4096 seq" "65536 seq" "4096 random" "65536 random"; do
  set -- $w
  rm -f "$ov"
  serve "$ov"
  nbdinfo --size "$uri" >/dev/null
  "$NBDCOW" checkpoint create "$tmp/ctl" "" before >/dev/null
  n=$(syncs "
import random
random.seed(7)
size = $1
slots = h.get_size() // size
for i in range($N):
    at = i if '$2' == 'seq' else random.randrange(slots)
    h.pwrite(bytes([i % 251 + 1]) * size, at * size)
    h.flush()
")
  echo "$1-byte $2 writes: $n syncs for $N flushes"
  # At least one a flush: a flush that synced nothing is lost at a crash.
  [ "$n" -le $(( N * 105 / 100 )) ] && [ "$n" -ge "$N" ] ||
    fail "$1-byte $2 writes: $n syncs for $N flushes"
  stop
done

# Writes into blocks held before the newest checkpoint, each flushed:
# the file marked stale before the write, then the record with its
# mark clears the flag (version 9), at most 2 syncs a flush (clearing
# the flag with a header of its own made 3, writing the pages for the
# marks 4), and the blocks changed since it exactly those after kill
# -9 (of twice as many held).  A write into a held block after the
# last flush marks the file stale anew, which the records before do
# not clear: after kill -9 every block counts as changed.
rm -f "$ov"
serve "$ov"
nbdsh -u "$uri" -c "
for b in range(2 * $N):
    h.pwrite(b'a' * $B, b * $B)
h.flush()"
"$NBDCOW" checkpoint create "$tmp/ctl" "" held >/dev/null
n=$(syncs "
for b in range($N):
    h.pwrite(b'b' * 4096, b * $B)
    h.flush()")
echo "4096-byte writes into held blocks: $n syncs for $N flushes"
[ "$n" -le $(( N * 205 / 100 )) ] && [ "$n" -ge "$N" ] ||
  fail "4096-byte writes into held blocks: $n syncs for $N flushes"
kill9
changed_since_held ()
{
  "$NBDCOW" map --json --since=held "$ov" |
    jq '[.[] | select(.state == "overlay") | .length] | add'
}
[ "$(changed_since_held)" = $(( N * B )) ] ||
  fail "the blocks changed since held: $("$NBDCOW" map --since=held "$ov")"
serve "$ov"
nbdsh -u "$uri" -c "
h.pwrite(b'c' * 4096, $N * $B)
h.flush()
h.pwrite(b'd' * 4096, ($N + 1) * $B)"
kill9
[ "$(changed_since_held)" = $(( 2 * N * B )) ] ||
  fail "a held block written after the last flush, then kill -9: the blocks changed since held: $("$NBDCOW" map --since=held "$ov")"

# The log after kill -9: block 1 in the first record, blocks 2 to 21
# (20 entries: two sectors) in the second, block 30 in the third.
rm -f "$ov"
serve "$ov"
nbdsh -u "$uri" -c "
B = $B
h.pwrite(b'\x11' * 4096, B)
h.flush()
for b in range(2, 22):
    h.pwrite(b'\x22' * 4096, b * B)
h.flush()
h.pwrite(b'\x33' * 4096, 30 * B)
h.flush()
"
kill9
[ "$(info "$ov" .log.records)" = 3 ] ||
  fail "the log does not hold 3 records: $("$NBDCOW" info --json "$ov")"
cp "$ov" "$tmp/intact"

# in_overlay FILE B...: whether nbdcow maps each block B to the overlay.
in_overlay ()
{
  f=$1; shift
  for b in "$@"; do
    "$NBDCOW" map "$f" | awk -v at=$((b * B)) '$1 == at && $3 == "overlay"' |
      grep -q . || return 1
  done
}
in_overlay "$ov" 1 2 21 30 || fail "nbdcow does not read the log's blocks"

# layout FILE: the log's offset and the data's, from the header.
layout ()
{
  "$PYTHON" -c "
import struct, sys
h = open(sys.argv[1], 'rb').read(64)
base_size, states_off, states_len, data_off = struct.unpack_from('<QQQQ', h, 24)
blocks = -(-base_size // $B)
print(states_off + states_len + -(-blocks // 1024) * 4096, data_off)" "$1"
}
read -r log_at data_at < <(layout "$ov")

# A cut-off sync: the third record whole, block 30's data not (its
# slot, the 22nd taken, holds zeros).
dd if=/dev/zero of="$ov" bs=4096 count=1 seek=$(( (data_at + 21 * B) / 4096 )) \
   conv=notrunc status=none
[ "$(info "$ov" .log.blocks_to_drop)" = 1 ] ||
  fail "nbdcow does not drop a record whose data is lost"
in_overlay "$ov" 30 && fail "nbdcow keeps a record whose data is lost"
in_overlay "$ov" 1 21 || fail "nbdcow dropped the records before the last"
serve "$ov"
nbdsh -u "$uri" -c "
B = $B
base = open('$tmp/base', 'rb')
base.seek(30 * B)
assert h.pread(4096, 30 * B) == base.read(4096), 'block 30 is not the base'
assert h.pread(4096, 21 * B) == b'\x22' * 4096, 'block 21 lost'
"
stop
[ "$(info "$ov" .log.blocks_dropped)" = 1 ] && [ "$(info "$ov" .log.records)" = 0 ] ||
  fail "after the restart: $("$NBDCOW" info --json "$ov")"
"$NBDCOW" check "$ov" >/dev/null || fail "nbdcow check after the drop"
echo "a record whose data a crash lost is dropped, and reported"

# A torn record: the second one's second sector never written, so the
# log ends with the first.  (Records start at 4096 in the log, each a
# sector of its own: the first is one sector, the second two.)
cp "$tmp/intact" "$ov"
dd if=/dev/zero of="$ov" bs=512 count=1 seek=$(( (log_at + 4096 + 1024) / 512 )) \
   conv=notrunc status=none
[ "$(info "$ov" .log.records)" = 1 ] ||
  fail "nbdcow reads a torn record: $("$NBDCOW" info --json "$ov")"
in_overlay "$ov" 1 || fail "the record before the torn one is lost"
for b in 2 21 30; do
  in_overlay "$ov" $b && fail "block $b of a torn record or after it is kept"
done
serve "$ov"
nbdsh -u "$uri" -c "
B = $B
assert h.pread(4096, B) == b'\x11' * 4096, 'block 1 lost'
base = open('$tmp/base', 'rb')
base.seek(2 * B)
assert h.pread(4096, 2 * B) == base.read(4096), 'block 2 is not the base'
"
stop
grep -q "cow-file=$ov: the log ends at a damaged record, and 1 whole records after it, the flushes of 1 blocks, are lost with it" \
  "$tmp/sock.err" || fail "nbdkit did not say the record after the torn one is lost"
echo "a torn record ends the log"

# The third record is whole after the torn second: no crash leaves
# that (a record is written only after the sync of the one before), so
# the second was damaged after its flush, and the third is lost with
# it: damage, which nbdcow check reports and info counts.  With the
# third never written, the log ends at the torn record: sound.
cp "$tmp/intact" "$ov"
dd if=/dev/zero of="$ov" bs=512 count=1 seek=$(( (log_at + 4096 + 1024) / 512 )) \
   conv=notrunc status=none
[ "$(info "$ov" '.log.records_lost, .log.blocks_lost' | tr '\n' ' ')" = "1 1 " ] ||
  fail "info of a whole record after a torn one: $("$NBDCOW" info --json "$ov")"
expect_exit 2 "$ov: damaged: the log ends at a damaged record, and 1 whole records after it, the flushes of 1 blocks, are lost" \
  "$NBDCOW" check "$ov"
dd if=/dev/zero of="$ov" bs=512 count=1 seek=$(( (log_at + 4096 + 1536) / 512 )) \
   conv=notrunc status=none
[ "$(info "$ov" '.log.records_lost')" = 0 ] ||
  fail "info of a torn last record: $("$NBDCOW" info --json "$ov")"
"$NBDCOW" check "$ov" >/dev/null || fail "nbdcow check of a torn last record"
echo "a whole record after a torn one is damage; a torn last record is not"

# A last record whose entry says it checked units the block does not
# hold (a hostile file, its checksum made right) is dropped too.
cp "$tmp/intact" "$ov"
"$PYTHON" -c "
import struct, sys
sys.path.insert(0, '$abs_top_srcdir/tests')
from importlib import import_module
crc32c = import_module('kept-format').crc32c
path, at = sys.argv[1], int(sys.argv[2]) + 4096 + 512 + 1024
with open(path, 'r+b') as f:
    f.seek(at)
    rec = bytearray(f.read(512))
    n, = struct.unpack_from('<I', rec, 16)
    struct.pack_into('<I', rec, 32 + 24, 0x20001)   # entry 0's units
    struct.pack_into('<I', rec, 20, 0)
    struct.pack_into('<I', rec, 20, crc32c(bytes(rec[:32 + 32 * n])))
    f.seek(at)
    f.write(rec)
" "$ov" "$log_at"
[ "$(info "$ov" .log.blocks_to_drop)" = 1 ] ||
  fail "a record checking units its block lacks: $("$NBDCOW" info --json "$ov" 2>&1)"
echo "a record that checked units its block does not hold is dropped"

# A clean stop leaves nothing to replay.
cp "$tmp/intact" "$ov"
serve "$ov"
stop
[ "$(info "$ov" .log.records)" = 0 ] && in_overlay "$ov" 1 2 21 30 ||
  fail "after a clean stop: $("$NBDCOW" info --json "$ov")"
echo "a clean stop leaves the log empty, the state pages holding it"
