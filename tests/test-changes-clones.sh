#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Clones and the changes view together: golden@vm1+ holds vm1's changes
# only, not vm2's nor those of golden itself, and the diff made through
# it over the golden image is vm1's disk; a view since a checkpoint of
# vm1 is vm1's, and vm2 has none.
. "$abs_top_srcdir/tests/functions.sh"

mkdir "$tmp/images"
make_base "$tmp/images/golden" $(( 8 * 1024 * 1024 ))
start_nbdkit "$tmp/sock" --filter=cow file dir="$tmp/images" \
  cow-clone-separator=@ cow-changes-separator=+ cow-control="$tmp/ctl"
uri () { echo "nbd+unix:///$1?socket=$tmp/sock"; }
# changed NAME: the ranges the view NAME reports as changed.
changed ()
{
  nbdinfo --map --json "$(uri "$1")" | "$PYTHON" -c 'import json, sys
print(" ".join("%d+%d" % (e["offset"], e["length"])
               for e in json.load(sys.stdin) if e["type"] != 1))'
}

nbdsh -u "$(uri golden@vm1)" -c 'h.pwrite(b"1" * 65536, 1 << 20)'
nbdsh -u "$(uri golden@vm2)" -c 'h.pwrite(b"2" * 65536, 2 << 20)'
nbdsh -u "$(uri golden)" -c 'h.pwrite(b"g" * 65536, 3 << 20)'
[ "$(changed golden@vm1+)" = "1048576+65536" ] ||
  fail "golden@vm1's view: $(changed golden@vm1+)"
[ "$(changed golden@vm2+)" = "2097152+65536" ] ||
  fail "golden@vm2's view: $(changed golden@vm2+)"
qemu-img convert -f raw -O qcow2 -B "$tmp/images/golden" -F raw \
  "$(uri golden@vm1+)" "$tmp/vm1.qcow2"
qemu-img compare "$tmp/vm1.qcow2" "$(uri golden@vm1)" ||
  fail "the diff of golden@vm1 is not its disk"

"$NBDCOW" checkpoint create "$tmp/ctl" golden@vm1 c1
nbdsh -u "$(uri golden@vm1)" -c 'h.pwrite(b"3" * 65536, 4 << 20)'
[ "$(changed golden@vm1+c1)" = "4194304+65536" ] ||
  fail "golden@vm1's view since c1: $(changed golden@vm1+c1)"
nbdinfo "$(uri golden@vm2+c1)" >"$tmp/out" 2>&1 &&
  fail "golden@vm2 has a checkpoint of vm1's"
grep -q 'export "golden@vm2" has no checkpoint "c1"' "$tmp/sock.err" ||
  fail "no message for a view of golden@vm2 since c1"
echo "each clone's view holds its own changes"
