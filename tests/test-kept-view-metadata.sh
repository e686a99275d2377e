#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A view of a kept overlay allocates the file's metadata whole (so that
# no write meets a full filesystem for it); kill -9 with the view alive
# leaves that allocated: nbdcow info counts it in bytes_to_give_back,
# nbdcow check --repair gives it back, and so does the next open by
# nbdkit.
. "$abs_top_srcdir/tests/functions.sh"

truncate -s 64G "$tmp/base"
ov=$tmp/ov
uri="nbd+unix:///?socket=$tmp/sock"
MiB=1048576

# crash_with_view NAME: 1 MiB written, view NAME made, nbdkit killed.
crash_with_view ()
{
  rm -f "$tmp/sock" "$tmp/ctl"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov" \
    cow-control="$tmp/ctl" cow-view-separator=@
  nbdsh -u "$uri" -c "h.pwrite(b'v' * $MiB, 5 * $MiB)"
  "$NBDCOW" view create "$tmp/ctl" "" "$1" >/dev/null
  nbdsh -u "$uri" -c "h.pwrite(b'w' * 65536, 5 * $MiB); h.flush()"
  kill -9 "$(cat "$tmp/sock.pid")"
  sleep 0.2
}
on_disk () { "$NBDCOW" info --json "$ov" | jq .bytes_on_disk; }
to_give_back () { "$NBDCOW" info --json "$ov" | jq .bytes_to_give_back; }

crash_with_view v1
[ "$(on_disk)" -gt $(( 16 * MiB )) ] ||
  fail "the view allocated no metadata: $(on_disk) bytes on disk"
[ "$(to_give_back)" -gt $(( 15 * MiB )) ] ||
  fail "after kill -9 with a view: $(to_give_back) bytes to give back"
"$NBDCOW" check --repair "$ov" > "$tmp/check" ||
  fail "check --repair: $(cat "$tmp/check")"
[ "$(on_disk)" -lt $(( 4 * MiB )) ] ||
  fail "after check --repair: $(on_disk) bytes on disk"
[ "$(to_give_back)" -eq 0 ] ||
  fail "after check --repair: $(to_give_back) bytes to give back"
echo "check --repair gives back the metadata a view allocated"

crash_with_view v2
rm -f "$tmp/sock"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
nbdsh -u "$uri" -c "
assert h.pread(65536, 5 * $MiB) == b'w' * 65536
assert h.pread(65536, 6 * $MiB - 65536) == b'v' * 65536"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"
[ "$(on_disk)" -lt $(( 4 * MiB )) ] ||
  fail "after an open by nbdkit: $(on_disk) bytes on disk"
"$NBDCOW" check "$ov" > "$tmp/check" || fail "check: $(cat "$tmp/check")"
echo "the next open gives back the metadata a view allocated"
