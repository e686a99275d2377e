#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# A daily job as nbdcow(1) shows it, for 40 days over a kept overlay
# (12 under a sanitizer or valgrind):
# the first run a full backup, each later one an increment over the
# newest file, which deletes the checkpoint of the one before, so the
# export holds one checkpoint and the job never meets the limit of 32.
# Every tenth day the chain restores as the disk.  Then the week kept
# (backup prune), the chain verified, restored, and a byte changed in
# its oldest file found by verify.  With --keep-base-checkpoint the
# base's checkpoint stays.
. "$abs_top_srcdir/tests/functions.sh"

make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
ctl=$tmp/ctl
uri="nbd+unix:///?socket=$tmp/sock"
serve_views cow-file="$tmp/ov.cow"
mkdir "$tmp/b"
checkpoints () { "$NBDCOW" checkpoint list "$ctl" "" | tr '\n' ' '; }

days=$(rounds 40 12)            # past the limit of 32, uninstrumented
for day in $(seq -w 1 "$days"); do
  nbdsh -u "$uri" -c "h.pwrite(b'$day' * 2048, $(( 10#$day )) * 65536); h.flush()"
  last=$(cd "$tmp/b" && ls -1 -- *.qcow2 2>/dev/null | tail -1)
  ( cd "$tmp/b" &&
    "$NBDCOW" backup ${last:+--base="$last"} "$ctl" "$uri" "d$day" \
      "$day.qcow2" >/dev/null ) || fail "day $day: the backup failed"
  [ "$(checkpoints)" = "d$day " ] ||
    fail "day $day: the export has checkpoints $(checkpoints)"
  if [ $(( 10#$day % 10 )) -eq 0 ]; then
    qemu-img compare -q "$tmp/b/$day.qcow2" "$uri" ||
      fail "day $day: the chain does not restore as the disk"
  fi
done

# The rest of the admin's job: keep a week, verify, restore.
"$NBDCOW" backup prune --keep=7 "$tmp/b/$day.qcow2" >/dev/null ||
  fail "prune --keep=7 failed"
[ "$(ls -1 "$tmp/b" | wc -l)" -eq 7 ] || fail "prune left $(ls "$tmp/b")"
"$NBDCOW" backup verify "$tmp/b/$day.qcow2" >/dev/null ||
  fail "the pruned chain does not verify"
qemu-img compare -q "$tmp/b/$day.qcow2" "$uri" ||
  fail "the pruned chain does not restore as the disk"
oldest=$(ls -1 "$tmp/b" | head -1)
cp "$tmp/b/$oldest" "$tmp/saved"
at=$(qemu-img map --output=json "$tmp/b/$oldest" |
       jq '[.[] | select(.data and .depth == 0)][0].offset')
flip_bit "$tmp/b/$oldest" $(( at + 100 ))
status=0
"$NBDCOW" backup verify "$tmp/b/$day.qcow2" >/dev/null 2>"$tmp/err" ||
  status=$?
[ "$status" -eq 2 ] && grep -q "$oldest: damaged" "$tmp/err" ||
  fail "a flipped byte in $oldest: verify exited $status: $(cat "$tmp/err")"
cp "$tmp/saved" "$tmp/b/$oldest"
echo "pruned to a week, the chain verifies, restores, and a damaged byte is found"

"$NBDCOW" backup --keep-base-checkpoint --base="$tmp/b/$day.qcow2" "$ctl" \
  "$uri" d41 "$tmp/b/41.qcow2" >/dev/null
[ "$(checkpoints)" = "d$day d41 " ] ||
  fail "--keep-base-checkpoint left checkpoints $(checkpoints)"
"$NBDCOW" checkpoint delete "$ctl" "" "d$day"
"$NBDCOW" backup --base="$tmp/b/41.qcow2" "$ctl" "$uri" d42 \
  "$tmp/b/42.qcow2" >/dev/null 2>"$tmp/err" || fail "backup d42 failed"
! grep -q . "$tmp/err" || fail "backup d42 said: $(cat "$tmp/err")"
[ "$(checkpoints)" = "d42 " ] ||
  fail "after d42 over d41, checkpoints $(checkpoints)"
echo "40 daily backups, one checkpoint kept on the server"
