#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A file whose log holds a record that moved a block out of the top
# slot (the second of two blocks zeroed, flushed, then kill -9): the
# state page still names that slot.  nbdcow check --repair, and the
# filter's recovery, keep the file openable with its data; and a file
# an older build left cut after the slots the log names (the page's
# entry past the end) opens again with every flushed byte.
. "$abs_top_srcdir/tests/functions.sh"

B=65536
ov=$tmp/ov
uri="nbd+unix:///?socket=$tmp/sock"
head -c $(( 8 * B )) /dev/urandom > "$tmp/base"

# crashed_file: the overlay made with two blocks written
# and stopped cleanly, then the second zeroed, flushed, and nbdkit
# killed: the log holds the zeroing.  Sets data_offset.
crashed_file ()
{
  rm -f "$ov" "$tmp/sock"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
  nbdsh -u "$uri" -c "
h.pwrite(b'a' * $B, 0)
h.pwrite(b'b' * $B, $B)
h.flush()"
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
  # A clean stop cuts the file after its last slot: two blocks.
  data_offset=$(( $(stat -c %s "$ov") - 2 * B ))
  rm -f "$tmp/sock"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
  nbdsh -u "$uri" -c "
h.zero($B, $B)
h.flush()"
  kill -9 "$(cat "$tmp/sock.pid")"
  sleep 0.2
}

# expect_data WHEN: the filter opens the file and serves both blocks.
expect_data ()
{
  rm -f "$tmp/sock"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
  nbdsh -u "$uri" -c "
assert h.pread($B, 0) == b'a' * $B, 'block 0'
assert h.pread($B, $B) == bytes($B), 'block 1 is not zero'" ||
    fail "$1: the data is not as flushed"
  stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
  "$NBDCOW" check "$ov" > "$tmp/check" ||
    fail "$1: nbdcow check after a clean stop: $(cat "$tmp/check")"
}

crashed_file
"$NBDCOW" check --repair "$ov" > "$tmp/check" ||
  fail "check --repair: $(cat "$tmp/check")"
"$NBDCOW" check "$ov" > "$tmp/check" ||
  fail "check after check --repair: $(cat "$tmp/check")"
expect_data "after check --repair"
echo "check --repair keeps a file whose log moved a block"

# What an older build's open or repair left: the file cut after the
# slots the log's states name (one block), the state page naming slot 1.
crashed_file
truncate -s $(( data_offset + B )) "$ov"
"$NBDCOW" check "$ov" > "$tmp/check" ||
  fail "check of the cut file: $(cat "$tmp/check")"
expect_data "the cut file"
echo "a file cut before its log was folded opens with its data"
