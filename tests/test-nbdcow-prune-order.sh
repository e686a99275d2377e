#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow backup prune persists in the order that makes a power loss at
# any moment leave the old chain or the new one (strace of its calls):
# the new full backup written and synced before it takes the file's
# name, that rename synced (its directory's fsync) before the first
# older file is removed, and the removals synced before it exits.
. "$abs_top_srcdir/tests/functions.sh"

command -v strace >/dev/null || skip "no strace"
uri="nbd+unix:///?socket=$tmp/sock"
make_base "$tmp/base" $(( 4 * 1024 * 1024 ))
serve_views cow-file="$tmp/ov.cow"
mkdir "$tmp/b"
for d in 1 2 3; do
  nbdsh -u "$uri" -c "h.pwrite(b'$d' * 65536, $d * 65536)"
  backup_day "$d"
done
# LeakSanitizer cannot run under ptrace: the other prune tests look
# for leaks.
( cd "$tmp/b" &&
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
  strace -f -o "$tmp/trace" -e trace=openat,pwrite64,write,fdatasync,fsync,linkat,rename,renameat,renameat2,unlink,unlinkat \
    "$NBDCOW" backup prune --keep=2 3.qcow2 ) >/dev/null ||
  fail "prune under strace failed"
"$PYTHON" - "$tmp/trace" <<'PY' || fail "prune's calls are out of order (above)"
import re, sys
calls = [l.split(None, 1)[1] for l in open(sys.argv[1]) if " " in l]
def fd_of(call):
    m = re.match(r"\w+\((\d+)", call)
    return int(m.group(1)) if m else None
new = dirs = None
order = []
for i, c in enumerate(calls):
    if c.startswith("openat(") and ("O_TMPFILE" in c or ".nbdcow-" in c):
        new = int(c.rsplit("= ", 1)[1])
    if c.startswith("openat(") and "O_DIRECTORY" in c:
        dirs = (dirs or set()) | {int(c.rsplit("= ", 1)[1])}
    name = c.split("(", 1)[0]
    if name in ("pwrite64", "write") and fd_of(c) == new:
        order.append(("write", i))
    elif name in ("fdatasync", "fsync") and fd_of(c) == new:
        order.append(("sync", i))
    elif name in ("fdatasync", "fsync") and dirs and fd_of(c) in dirs:
        order.append(("dirsync", i))
    elif name.startswith("rename") and '2.qcow2"' in c.split(",")[-1]:
        order.append(("rename", i))
    elif name.startswith("unlink") and '.qcow2"' in c:
        order.append(("unlink", i))
kinds = [k for k, _ in order]
def fail(why):
    print("prune-order:", why, kinds, file=sys.stderr)
    sys.exit(1)
if "rename" not in kinds or "unlink" not in kinds:
    fail("no rename onto 2.qcow2 or no removal seen")
r = kinds.index("rename")
writes = [j for j, k in enumerate(kinds) if k == "write"]
if not writes or "sync" not in kinds[writes[-1]:r]:
    fail("the new file was not synced after its last write, before the rename")
u = kinds.index("unlink")
if "dirsync" not in kinds[r:u]:
    fail("the rename was not synced before the first removal")
if kinds[-1] != "dirsync":
    fail("the removals were not synced")
PY
[ ! -e "$tmp/b/1.qcow2" ] || fail "prune left 1.qcow2"
echo "prune writes, syncs, renames, syncs the folder, removes, syncs"
