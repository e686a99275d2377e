#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Drop-in to the letter: our filter and the distribution's, side by
# side over nbdkit's own plugins and filters, the same random requests
# as a well-behaved client splits them by what each server advertises
# (tests/differential.py), every read checked against a model.  Ours
# must never fail a request (no stack here fails any) and never read a
# wrong byte.  Prints the table: stack, requests, errors ours and
# theirs, wrong reads ours and theirs.  Without the distribution's
# filter ours runs alone against the model; a stack whose plugin or
# filter the nbdkit in use lacks is skipped, said in the table.
. "$abs_top_srcdir/tests/functions.sh"

filterdir=$("$system_nbdkit" --dump-config | sed -n 's/^filterdir=//p')
reference=$filterdir/nbdkit-cow-distrib-filter.so     # the Debian package's divert
[ -f "$reference" ] || reference=$filterdir/nbdkit-cow-filter.so
if [ ! -f "$reference" ]; then
  echo "no distribution cow filter in $filterdir: ours alone"
  reference=-
fi
ops=$(rounds 200 30)

size=$(( 4 * 1024 * 1024 ))
make_base "$tmp/base" $size
third=$(( size / 3 ))
xz --block-size=1MiB -k -c "$tmp/base" > "$tmp/base.xz"
gzip -c "$tmp/base" > "$tmp/base.gz"
# The base as partition 1 of an MBR disk, from 1M.
"$PYTHON" - "$tmp/base" "$tmp/disk.mbr" <<'EOF'
import struct, sys
base = open(sys.argv[1], "rb").read()
sectors = len(base) // 512
mbr = bytearray(512)
mbr[446:462] = struct.pack("<B3sB3sII", 0, b"\0\0\0", 0x83, b"\0\0\0",
                           2048, sectors)
mbr[510:512] = b"\x55\xaa"
with open(sys.argv[2], "wb") as f:
    f.write(mbr + bytes(2048 * 512 - 512) + base + bytes(512 * 100))
EOF
# The base's extents, truthfully: data, a hole of zeros, data.
printf '0 %d\n%d %d hole,zero\n%d %d\n' $third $third $third \
  $(( 2 * third )) $(( size - 2 * third )) > "$tmp/extents"

# The nbd plugin over qemu-nbd, and curl over HTTP, both on the base.
qemu-nbd -r -t -e 4 -f raw -k "$tmp/qemu.sock" "$tmp/base" &
on_exit "kill $!"
mkdir "$tmp/www" && ln "$tmp/base" "$tmp/www/base"
"$PYTHON" "$tests/http-range.py" "$tmp/www" "$tmp/http.port" &
on_exit "kill $!"
for _ in $(seq 100); do
  [ -S "$tmp/qemu.sock" ] && [ -s "$tmp/http.port" ] && break
  sleep 0.1
done
url=http://127.0.0.1:$(cat "$tmp/http.port")/base

policy ()
{
  echo --filter=blocksize-policy file "$tmp/base" blocksize-error-policy=error \
    blocksize-minimum="$1" blocksize-preferred="$2" blocksize-maximum="$3"
}

# Every value nbdkit's filter takes, ours takes.  Only in the plain
# suite: parsing is the same code in every build, and under valgrind
# or a sanitizer each start of ours costs seconds (the stacks below
# run in every suite).
instrumented ||
for param in cow-block-size={0,4095,4096,4097,4K,64K,1M,32M,64M,1G,2G,3G,4G,1E,x} \
             cow-on-read={true,false,on,off,yes,no,1,0,/nowhere,rel/path,maybe} \
             cow-on-cache={true,false,on,off,yes,no,1,0,maybe}; do
  if [ "$reference" != - ] &&
     "$system_nbdkit" -U - --filter="$reference" memory 1M "$param" \
       --run true 2>/dev/null; then
    "$NBDKIT" -U - --filter=cow memory 1M "$param" --run true ||
      fail "$param: taken by the distribution's filter, refused by ours"
    echo "$param: taken by both"
  fi
done

failed=0
seed=0
stack ()
{
  label=$1; shift
  seed=$(( seed + 1 ))
  for arg; do
    case $arg in
      --filter=*) has_filter "${arg#--filter=}" || missing=${arg#--filter=} ;;
      -*|*=*) ;;
      *) has_plugin "$arg" || missing=$arg; break ;;
    esac
  done
  if [ -n "${missing:-}" ]; then
    printf '%-34s skipped: nbdkit has no %s\n' "$label" "$missing"
    missing=
    return
  fi
  "$PYTHON" "$tests/differential.py" "$NBDKIT" "$system_nbdkit" \
    "$reference" "$seed" "$ops" "$label" "$@" || failed=1
}

printf '%-34s %6s  %9s  %9s\n' stack requests "errors" "wrong"
printf '%-34s %6s  %4s %4s  %4s %4s\n' "" "" ours ref ours ref
stack file                       file "$tmp/base"
stack "file, cow-block-size=4K"  file "$tmp/base" cow-block-size=4K
stack memory                     memory 4M
stack pattern                    pattern 4M
stack data                       data '1 2 3 @4096 ( 0x55 0xaa )*5000 @1048576 9' size=4M
stack sparse-random              sparse-random 4M seed=7
stack xz                         --filter=xz file "$tmp/base.xz"
stack gzip                       --filter=gzip file "$tmp/base.gz"
stack partition                  --filter=partition file "$tmp/disk.mbr" partition=1
stack offset                     --filter=offset file "$tmp/base" offset=1M range=2M
stack truncate                   --filter=truncate file "$tmp/base" truncate=3000001
stack blocksize                  --filter=blocksize file "$tmp/base" minblock=4K maxdata=32K
stack "policy 512/64K/64K"       $(policy 512 64K 64K)
stack "policy 4K/16K/16K"        $(policy 4K 16K 16K)
stack "policy 64K/64K/128K, 4K"  $(policy 64K 64K 128K) cow-block-size=4K
stack "policy 512/4K/1M, 1M"     $(policy 512 4K 1M) cow-block-size=1M
stack cacheextents               --filter=cacheextents file "$tmp/base"
stack noextents                  --filter=noextents file "$tmp/base"
stack nozero                     --filter=nozero file "$tmp/base"
stack fua                        --filter=fua file "$tmp/base" fuamode=emulate
stack readahead                  --filter=readahead file "$tmp/base"
stack cache                      --filter=cache file "$tmp/base"
stack extentlist                 --filter=extentlist file "$tmp/base" extentlist="$tmp/extents"
stack swab                       --filter=swab file "$tmp/base" swab-bits=32
stack "nbd over qemu-nbd"        nbd socket="$tmp/qemu.sock"
stack "curl over HTTP"           curl "$url"
[ "$failed" -eq 0 ] || fail "ours erred or read wrong bytes where the distribution's filter did not"
