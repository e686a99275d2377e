#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The quick-start demo: serve a demo disk through the cow filter, write
# through it with a real NBD client, show that the client sees its
# writes while the base disk is untouched.
set -eu
: "${abs_top_builddir:?run through make demo}"
PATH=/usr/bin:/usr/sbin:$PATH
export PATH

work=$(mktemp -d /var/tmp/cow-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work base=$work/base.img

echo "== A 64 MiB demo base disk, starting with a line of text:"
truncate -s 64M "$base"
printf 'This is the base disk, which must never change.\n' |
  dd of="$base" conv=notrunc status=none
head -c 48 "$base"; echo
sum_before=$(md5sum < "$base")

echo "== Serving it with: nbdkit --filter=cow file $base"
echo "== A client (nbdsh) writes through the filter and reads back:"
"$abs_top_builddir/nbdkit" -U - --filter=cow file "$base" --run '
nbdsh -u "$uri" -c "
hello = b\"Hello from the client, written through the cow filter\"
more = b\"and more, 10 MiB in\"
print(\"  before:\", h.pread(48, 0).decode().strip())
h.pwrite(hello, 0)
h.pwrite(more, 10 * 2**20)
print(\"  after: \", h.pread(len(hello), 0).decode())
print(\"  after: \", h.pread(len(more), 10 * 2**20).decode())
"
echo "== Where the data lives now, as nbdinfo --map sees it:"
nbdinfo --map "$uri" | sed "s/^/  /"
'

echo "== The base disk afterwards:"
head -c 48 "$base"; echo
if [ "$(md5sum < "$base")" = "$sum_before" ]; then
  echo "== The base disk is unchanged (same md5sum). Demo OK."
else
  echo "== ERROR: the base disk changed!" >&2
  exit 1
fi
