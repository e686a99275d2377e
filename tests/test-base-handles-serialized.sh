#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-base-handles=1 over a plugin whose thread model serializes
# requests: the filter never makes two calls at once into the shared
# context, while four clients copy out through it at once, each over a
# connection of its own (nbdkit serializes one connection's requests by
# itself: only the shared context meets several).  The plugin (nbdkit's
# eval plugin) fails any read that begins while another is in progress;
# the same plugin declaring the parallel model, a control, shows that
# the copies do make calls at once.
. "$abs_top_srcdir/tests/functions.sh"

"$PYTHON" -c "
import sys
sys.stdout.buffer.write(b''.join(b'%015d\n' % i for i in range(1 << 17)))
" > "$tmp/base"

# serve SOCKET MODEL: the base through the eval plugin in thread model
# MODEL, shared by all connections.
serve ()
{
  start_nbdkit "$1" --filter=cow eval cow-base-handles=1 \
    thread_model="echo $2" \
    get_size="stat -c %s '$tmp/base'" \
    pread="mkdir '$tmp/busy.$2' 2>/dev/null || { echo 'EIO two reads at once' >&2; exit 1; }
           sleep 0.01
           dd if='$tmp/base' skip=\$4 count=\$3 iflag=skip_bytes,count_bytes status=none
           rmdir '$tmp/busy.$2'" \
    open="echo >> '$tmp/opens.$2'"
}

# copy_four SOCKET: four clients copy the export out at once, one
# connection each, after a first client has opened the shared context;
# succeeds if every copy succeeds and is the base.
copy_four ()
{
  nbdinfo --size "nbd+unix:///?socket=$1" >/dev/null   # opens the context
  pids=
  for i in 1 2 3 4; do
    nbdcopy --connections=1 --request-size=65536 \
      "nbd+unix:///?socket=$1" "$tmp/out.$i" 2>>"$tmp/copy.err" &
    pids="$pids $!"
  done
  status=0
  for pid in $pids; do
    wait "$pid" || status=1
  done
  for i in 1 2 3 4; do
    [ "$status" -ne 0 ] || cmp -s "$tmp/out.$i" "$tmp/base" || status=1
    rm -f "$tmp/out.$i"
  done
  return "$status"
}

serve "$tmp/sock1" serialize_requests
copy_four "$tmp/sock1" ||
  fail "copies through a serialized shared context failed: $(cat "$tmp/copy.err")"
[ "$(wc -l < "$tmp/opens.serialize_requests")" -eq 1 ] ||
  fail "the plugin was opened $(wc -l < "$tmp/opens.serialize_requests") times"

serve "$tmp/sock2" parallel
if copy_four "$tmp/sock2"; then
  fail "control: no two reads at once in the parallel model"
fi
echo "control: reads at once in the parallel model, as expected"
