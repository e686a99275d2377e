#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow export makes, with no nbdkit running, a qcow2 file over the
# raw base that holds exactly the overlay: qemu-img check finds it
# clean, qemu-img compare finds it identical to the live view (the
# base through the filter with that cow-file), its own layer holds the
# overlay's blocks and zero clusters where the overlay has zero
# blocks, and it takes about the overlay's data in space.
. "$abs_top_srcdir/tests/functions.sh"
. "$tests/nbdcow-setup.sh"

mkdir "$tmp/qcow"
# A base named relative to the qcow2 file, as qemu-img create -b takes it.
ln -s ../base "$tmp/qcow/base.raw"
"$NBDCOW" export "$ov" --base=base.raw "$tmp/qcow/o.qcow2"
qemu-img check "$tmp/qcow/o.qcow2" || fail "qemu-img check"
qemu-img info --output=json "$tmp/qcow/o.qcow2" > "$tmp/info.json"
jq -e '.format == "qcow2" and ."backing-filename" == "base.raw" and
       ."backing-filename-format" == "raw"' "$tmp/info.json" >/dev/null ||
  fail "qemu-img info: $(cat "$tmp/info.json")"
data=$("$NBDCOW" info --json "$ov" | jq .data_bytes)
actual=$(jq '."actual-size"' "$tmp/info.json")
[ "$actual" -ge "$data" ] && [ "$actual" -le $(( data + 1024 * 1024 )) ] ||
  fail "the qcow2 file takes $actual bytes for $data bytes of data"

qemu-img compare "$tmp/qcow/o.qcow2" "$tmp/live.img" || fail "compare with the copy"
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-file="$ov"
qemu-img compare -f qcow2 -F raw "$tmp/qcow/o.qcow2" "$uri" ||
  fail "compare with the live view"
stop_nbdkit "$(cat "$tmp/sock.pid")" "$tmp/sock.err"

# The qcow2 file's own layer (depth 0) holds data exactly where the
# overlay does, and reads as zeros without data where it has zero blocks.
"$PYTHON" - "$tmp/qcow/o.qcow2" <<PY || fail "qemu-img map differs from nbdcow map"
import json, subprocess, sys
def runs(pairs):
    merged = []
    for start, end in sorted(pairs):
        if merged and merged[-1][1] == start:
            merged[-1][1] = end
        else:
            merged.append([start, end])
    return merged
qmap = json.loads(subprocess.check_output(
    ['qemu-img', 'map', '--output=json', sys.argv[1]]))
cmap = json.loads(subprocess.check_output(['$NBDCOW', 'map', '--json', '$ov']))
def top(pred):
    return runs((e['start'], e['start'] + e['length'])
                for e in qmap if e['depth'] == 0 and pred(e))
def ours(state):
    return runs((r['offset'], r['offset'] + r['length'])
                for r in cmap if r['state'] == state)
assert top(lambda e: e['data']) == ours('overlay'), 'data'
assert top(lambda e: e['zero'] and not e['data']) == ours('zero'), 'zero'
PY

# Refused: a base of another size, and no --base.  Nothing is left.
truncate -s 1M "$tmp/small"
expect_exit 1 "--base=$tmp/small: 1048576 bytes, but the base of $ov has $((128 * B))" \
  "$NBDCOW" export "$ov" --base="$tmp/small" "$tmp/bad.qcow2"
expect_exit 1 "expected FILE, --base=BASE and OUT" \
  "$NBDCOW" export "$ov" "$tmp/bad.qcow2"
[ ! -e "$tmp/bad.qcow2" ] || fail "a refused export left a file"

# Refused, before anything is written: an OUT that is the overlay, the
# base, or not a regular file.
cp "$ov" "$tmp/ov.before"
cp "$tmp/base" "$tmp/base.before"
expect_exit 1 "$ov: is the overlay itself" \
  "$NBDCOW" export "$ov" --base="$tmp/base" "$ov"
expect_exit 1 "$tmp/base: is the base itself" \
  "$NBDCOW" export "$ov" --base="$tmp/base" "$tmp/base"
mkdir "$tmp/dir"
expect_exit 1 "$tmp/dir: is not a regular file" \
  "$NBDCOW" export "$ov" --base="$tmp/base" "$tmp/dir"
# A relative base and a directory OUT: OUT is what is wrong, not the
# base looked for beside it.
(cd "$tmp" && expect_exit 1 "^nbdcow: /: is not a regular file" \
  "$NBDCOW" export "$ov" --base=base /)
cmp -s "$ov" "$tmp/ov.before" || fail "a refused export changed the overlay"
cmp -s "$tmp/base" "$tmp/base.before" || fail "a refused export changed the base"
[ -z "$(ls -A "$tmp/dir")" ] || fail "a refused export left a file in $tmp/dir"

# An OUT that is a symbolic link is written through, as qemu-img
# writes: the link stays, the file it points to (in another directory)
# is the export, and a dangling link gets its file made.
mkdir "$tmp/links" "$tmp/images"
cp "$tmp/base.before" "$tmp/images/old.qcow2"
ln -s ../images/old.qcow2 "$tmp/links/o.qcow2"
ln -s ../images/new.qcow2 "$tmp/links/dangling.qcow2"
for link in o dangling; do
  "$NBDCOW" export "$ov" --base="$tmp/base" "$tmp/links/$link.qcow2"
  [ -L "$tmp/links/$link.qcow2" ] || fail "the export replaced the link $link"
  qemu-img compare "$tmp/links/$link.qcow2" "$tmp/live.img" ||
    fail "compare through the link $link"
done
cmp -s "$tmp/images/old.qcow2" "$tmp/base.before" &&
  fail "the file behind the link was not replaced"
[ "$(ls "$tmp/images")" = "$(printf 'new.qcow2\nold.qcow2')" ] ||
  fail "behind the links: $(ls "$tmp/images")"

# Without /proc a nameless file could not be named at the end: the
# export writes OUT itself from the start, and succeeds.  (Sanitizer
# runtimes and valgrind need /proc themselves; hiding it takes root.)
if ! instrumented && unshare -m true 2>/dev/null; then
  mkdir "$tmp/noproc"
  unshare -m sh -c 'mount -t tmpfs none /proc && exec "$@"' sh \
    "$NBDCOW" export "$ov" --base="$tmp/base" "$tmp/noproc/o.qcow2" ||
    fail "export without /proc"
  qemu-img compare "$tmp/noproc/o.qcow2" "$tmp/live.img" ||
    fail "compare of the export made without /proc"
  [ "$(ls -A "$tmp/noproc")" = o.qcow2 ] ||
    fail "without /proc, beside OUT: $(ls -A "$tmp/noproc")"
fi
