#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Over a stack that limits its requests (nbdkit's blocksize-policy
# filter with the error policy, which refuses any request outside its
# limits), the filter advertises the stack's minimum and maximum, a
# block preferred where the maximum allows, and sends down only
# requests the stack accepts: reads, copy-ups, read-modify-writes,
# extents and cache, with a maximum below the block size and a minimum
# above it.  Random requests of any alignment and length, with
# cow-on-read and cow-on-cache, read back as the model says.
. "$abs_top_srcdir/tests/functions.sh"

size=$(( 3 * 1024 * 1024 + 65536 ))
make_base "$tmp/base" $size

# check BLOCK MIN PREF MAX WANT-PREF: one stack.
check ()
{
  block=$1 min=$2 pref=$3 max=$4 want_pref=$5
  stack=(--filter=cow --filter=blocksize-policy file "$tmp/base"
         blocksize-error-policy=error blocksize-minimum="$min"
         blocksize-preferred="$pref" blocksize-maximum="$max"
         cow-block-size="$block")
  got=$("$NBDKIT" -U - "${stack[@]}" --run 'nbdinfo --json "$uri"' |
        jq -c '.exports[0] | [.block_size_minimum, .block_size_preferred,
                             .block_size_maximum]')
  [ "$got" = "[$min,$want_pref,$max]" ] ||
    fail "block $block over $min/$pref/$max advertised $got, not [$min,$want_pref,$max]"
  "$NBDKIT" -U - "${stack[@]}" cow-on-read=true cow-on-cache=true \
    --run "$PYTHON '$tests/rw-model.py' \"\$uri\" '$tmp/base' $block 1 300" \
    2>"$tmp/err" || fail "block $block over $min/$pref/$max: $(cat "$tmp/err")"
  if grep 'request rejected' "$tmp/err"; then
    fail "block $block over $min/$pref/$max: the filter broke the limits"
  fi
  echo "block $block over $min/$pref/$max: advertised $got, served"
}

check 65536   512    65536  65536     65536    # the limit is a block
check 65536   512    4096   16384     4096     # a maximum below a block
check 4096    65536  65536  131072    65536    # a minimum above a block
check 1048576 4096   4096   4194304   1048576  # preferred raised to a block
check 4096    1      512    4096      4096

# The nbd plugin over qemu-nbd, which refuses requests over 32M: with
# 64M blocks a partial write reads its block in two requests.
truncate -s 100M "$tmp/big"
printf 'base data' | dd of="$tmp/big" bs=1 seek=40000000 conv=notrunc 2>/dev/null
qemu-nbd -r -t -f raw -k "$tmp/qemu.sock" "$tmp/big" &
on_exit "kill $!"
for _ in $(seq 100); do [ -S "$tmp/qemu.sock" ] && break; sleep 0.1; done
"$NBDKIT" -U - --filter=cow nbd socket="$tmp/qemu.sock" cow-block-size=64M \
  --run 'nbdsh -u "$uri" -c "
assert h.get_block_size(nbd.SIZE_MAXIMUM) == 32 * 1024 * 1024
h.pwrite(b\"new\", 1000)
assert h.pread(3, 1000) == b\"new\"
assert h.pread(9, 40000000) == b\"base data\"
"' || fail "64M blocks over qemu-nbd"
echo "64M blocks over qemu-nbd: served"
