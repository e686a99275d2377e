#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-file=PATH refuses, naming the file, what it cannot safely use: at
# start a file that is not an overlay, a truncated or corrupted one, one
# made for another block size, and one that another nbdkit has open;
# one made for another base size when the first connection finds the
# base, which stops nbdkit with status 1.  A checkpoint table is
# refused only if both its copies are damaged.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 10M "$tmp/base"
ov="$tmp/ov"

# A good overlay to damage.
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "h.pwrite(b'data', 0); h.flush()"

# Another server on the same file, while the first runs.
expect_start_failure "cow-file=$ov: in use: locked by another process" \
  --filter=cow file "$tmp/base" cow-file="$ov"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

expect_start_failure "cow-file=$ov: made with cow-block-size=65536, not 4096" \
  --filter=cow file "$tmp/base" cow-file="$ov" cow-block-size=4K
truncate -s 11M "$tmp/base11"
# The base size is known only once a client opens the default export
# (nbdkit opens no plugin without a connection): that first connection
# is refused and nbdkit stops, with the message and status 1.
expect_first_connection_failure ()
{
  pattern=$1; shift
  rm -f "$tmp/sock2"
  "$NBDKIT" -f -U "$tmp/sock2" "$@" 2>"$tmp/err" &
  pid=$!
  for _ in $(seq 300); do [ -S "$tmp/sock2" ] && break; sleep 0.1; done
  if nbdinfo --size "nbd+unix:///?socket=$tmp/sock2" >/dev/null 2>&1; then
    fail "a client was served with: $*"
  fi
  status=0
  if ! timeout 60 tail --pid=$pid -f /dev/null; then
    dump_stacks $pid
    kill -9 $pid
    fail "nbdkit did not stop: $*"
  fi
  wait $pid || status=$?
  [ "$status" -eq 1 ] || fail "nbdkit exited with $status, not 1: $*"
  grep -Eq -- "$pattern" "$tmp/err" || fail "wrong message for $*: $(cat "$tmp/err")"
}
expect_first_connection_failure "cow-file=$ov: made for a base of 10485760 bytes, this base has 11534336" \
  --filter=cow file "$tmp/base11" cow-file="$ov"

cp "$ov" "$tmp/good"
# The state and data areas' offsets, from the header
# (docs/overlay-format.md).
states=$(od -An -tu8 -j32 -N8 "$tmp/good" | tr -d ' ')
data_offset=$(od -An -tu8 -j48 -N8 "$tmp/good" | tr -d ' ')
damage ()
{
  cp "$tmp/good" "$ov"
  printf "$2" | dd of="$ov" bs=1 seek="$1" conv=notrunc 2>/dev/null
}
damage 0 'X'          # the magic
expect_start_failure "cow-file=$ov: not a cow overlay" \
  --filter=cow file "$tmp/base" cow-file="$ov"
damage 24 '\001'      # the base size, under the checksum
expect_start_failure "cow-file=$ov: corrupted header" \
  --filter=cow file "$tmp/base" cow-file="$ov"
damage $states '\377'    # block 0 in a slot past the end of the file
expect_start_failure "cow-file=$ov: corrupted block states or truncated file" \
  --filter=cow file "$tmp/base" cow-file="$ov"
damage $(( states + 16 )) '\002'   # block 1 in block 0's slot
expect_start_failure "cow-file=$ov: corrupted block states \(block 1 is in slot 0, which another block has\)" \
  --filter=cow file "$tmp/base" cow-file="$ov"
damage 8192 'X'       # one copy of the checkpoint table: the other serves
cp "$ov" "$tmp/one-copy"
printf 'X' | dd of="$ov" bs=1 seek=12288 conv=notrunc 2>/dev/null
expect_start_failure "cow-file=$ov: corrupted checkpoint table \(both copies\)" \
  --filter=cow file "$tmp/base" cow-file="$ov"
cp "$tmp/one-copy" "$ov"
"$NBDCOW" info "$ov" >/dev/null || fail "one torn copy of the table refused"
head -c 5000 "$tmp/good" > "$ov"
expect_start_failure "cow-file=$ov: not a cow overlay \(truncated header\)" \
  --filter=cow file "$tmp/base" cow-file="$ov"
head -c $(( data_offset + 34464 )) "$tmp/good" > "$ov"    # inside block 0's slot
expect_start_failure "cow-file=$ov: corrupted block states or truncated file \(block 0 is in slot 0" \
  --filter=cow file "$tmp/base" cow-file="$ov"
head -c 10000 "$tmp/good" > "$ov"     # inside the states
expect_start_failure "cow-file=$ov: truncated: shorter than its header says" \
  --filter=cow file "$tmp/base" cow-file="$ov"
# Format version 2: the value 3 is no state.
cp "$tmp/good" "$ov"
"$PYTHON" "$tests/kept-format.py" v2 "$ov"
printf '\377' | dd of="$ov" bs=1 seek=8192 conv=notrunc 2>/dev/null
expect_start_failure "cow-file=$ov: corrupted block states \(block 0 has the invalid state 3\)" \
  --filter=cow file "$tmp/base" cow-file="$ov"
echo "some text file" > "$ov"
expect_start_failure "cow-file=$ov: not a cow overlay" \
  --filter=cow file "$tmp/base" cow-file="$ov"
expect_start_failure "cow-file=$tmp: not a regular file|cow-file=$tmp: Is a directory" \
  --filter=cow file "$tmp/base" cow-file="$tmp"
expect_start_failure "cow-file=: must name a file" \
  --filter=cow file "$tmp/base" cow-file=
