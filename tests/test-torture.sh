#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The torture client (tests/torture.c) over a fast and a slow base
# (nbdkit's delay filter below ours, 10 ms a read: at 1 ms the windows
# in which a copy-up can race a write are too short for the client to
# hit often), with cow-on-read off, on, and switched by path while
# running, for block sizes 4K, 64K and 1M, and a kept overlay (cow-file,
# its one file under the default 8 stripes of write locks) over the
# fast base: 8 connections x depth 32 of random requests, every read
# checked against the model.
# TORTURE_SECONDS sets each run's length, TORTURE_TOTAL_SECONDS all
# runs' together (make check-stress sets it).
# Instrumented, the 64K blocks are left out and each run lasts 1 s, not
# 2: starting nbdkit dominates.
. "$abs_top_srcdir/tests/functions.sh"

block_sizes="4096 65536 1048576"
! instrumented || block_sizes="4096 1048576"
# Every configuration, the arguments of run: listed first, so that
# TORTURE_TOTAL_SECONDS is shared by exactly as many as will run.
configurations=()
for base_kind in fast slow; do
  for cow_on_read in false true switched; do
    for block_size in $block_sizes; do
      configurations+=("$base_kind $cow_on_read $block_size")
    done
  done
done
for block_size in $block_sizes; do
  configurations+=("fast false $block_size kept")
done
seconds=${TORTURE_SECONDS:-$(rounds 2 1)}
[ -z "${TORTURE_TOTAL_SECONDS:-}" ] ||
  seconds=$(( TORTURE_TOTAL_SECONDS / ${#configurations[@]} ))
make_base "$tmp/base" $(( 16 * 1024 * 1024 + 777 ))
echo "TORTURE_SECONDS=$seconds (${#configurations[@]} configurations)"

run ()
{
  base_kind=$1 cow_on_read=$2 block_size=$3 overlay=${4:-throw-away}
  delay_filter=() delay_args=() kept_args=()
  if [ "$overlay" = kept ]; then
    rm -f "$tmp/kept"
    kept_args=(cow-file="$tmp/kept")
  fi
  if [ "$base_kind" = slow ]; then
    delay_filter=(--filter=delay) delay_args=(delay-read=10ms)
  fi
  cor=$cow_on_read
  if [ "$cow_on_read" = switched ]; then
    cor=$tmp/cor
    ( while :; do touch "$cor"; sleep 0.2; rm -f "$cor"; sleep 0.2; done ) &
    toggler=$!
  fi
  echo "== $base_kind base, cow-on-read=$cow_on_read, cow-block-size=$block_size, $overlay"
  "$NBDKIT" -U - --filter=cow "${delay_filter[@]}" file "$tmp/base" "${delay_args[@]}" \
    cow-block-size="$block_size" cow-on-read="$cor" cow-on-cache=true \
    "${kept_args[@]}" \
    --run "'$abs_top_builddir/tests/torture' -Q -t $seconds -b $block_size \
           ${TORTURE_ARGS:-} '$tmp/base' \"\$uri\"" || fail "torture failed"
  if [ "$cow_on_read" = switched ]; then
    kill "$toggler"
    wait "$toggler" 2>/dev/null || true
  fi
}

for configuration in "${configurations[@]}"; do
  # shellcheck disable=SC2086 # the words are run's arguments
  run $configuration
done
