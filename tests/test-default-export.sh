#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The default export is the default export by whatever name nbdkit
# hands the filter (the plugin's .default_export): it takes the place
# cow-max-exports keeps for it, its kept file is cow-file=PATH itself,
# and asked for by "" or by that name it is one overlay.
. "$abs_top_srcdir/tests/functions.sh"

mkdir "$tmp/dir"
truncate -s 1M "$tmp/dir/disk1" "$tmp/dir/disk2"

# cow-max-exports=1: the one overlay is the default export's, named
# disk1 by the exportname filter; disk2 is refused.
"$NBDKIT" -U - --filter=cow --filter=exportname file dir="$tmp/dir" \
  default-export=disk1 cow-max-exports=1 --run '
  nbdsh -u "$uri" -c "h.pwrite(b\"by default\", 0)" &&
  nbdsh -u "nbd+unix:///disk1?socket=$unixsocket" \
    -c "assert h.pread(10, 0) == b\"by default\"" &&
  ! nbdinfo --size "nbd+unix:///disk2?socket=$unixsocket" 2>/dev/null' ||
  fail "the default export did not take its kept place"

# cow-file: the default export's writes go to PATH, not PATH.NAME, with
# its name coming from the plugin (eval's default_export).
eval_plugin=(eval get_size='echo 1048576' default_export='echo foo'
             pread='dd if=/dev/zero count=$3 iflag=count_bytes 2>/dev/null')
"$NBDKIT" -U - --filter=cow "${eval_plugin[@]}" cow-file="$tmp/k.cow" \
  --run 'nbdsh -u "$uri" -c "h.pwrite(b\"kept\", 4096); h.flush()"' ||
  fail "cannot write the default export"
[ ! -e "$tmp/k.cow.foo" ] || fail "the default export's data went to k.cow.foo"
"$NBDCOW" info "$tmp/k.cow" | grep -q '^blocks: 1 in the overlay' ||
  fail "k.cow does not hold the default export's write"
# And back after a restart, by "" and by its name.
"$NBDKIT" -U - --filter=cow "${eval_plugin[@]}" cow-file="$tmp/k.cow" \
  --run 'nbdsh -u "$uri" -c "assert h.pread(4, 4096) == b\"kept\"" &&
         nbdsh -u "nbd+unix:///foo?socket=$unixsocket" \
           -c "assert h.pread(4, 4096) == b\"kept\""' ||
  fail "the kept default export did not read back"

# A client that opens the default export by its name before any asks
# for "" makes the overlay of that name, which "" then shares: one
# overlay per export, said once.
"$NBDKIT" -U - --filter=cow "${eval_plugin[@]}" --run '
  nbdsh -u "nbd+unix:///foo?socket=$unixsocket" -c "h.pwrite(b\"named\", 0)" &&
  nbdsh -u "$uri" -c "assert h.pread(5, 0) == b\"named\""' 2>"$tmp/err" ||
  fail "the default export and its name are two overlays: $(cat "$tmp/err")"
grep -q 'the default export is "foo", which a client opened' "$tmp/err" ||
  fail "not said: $(cat "$tmp/err")"
