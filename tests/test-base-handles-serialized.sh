#!/usr/bin/env bash
# cow-base-handles=1 over a plugin whose thread model serializes
# requests: the filter never makes two calls at once into the shared
# context, while four connections copy out through it.  The plugin
# (nbdkit's eval plugin) fails any read that begins while another is in
# progress; the same plugin declaring the parallel model, a control,
# shows that the copy does make calls at once.
. "$abs_top_srcdir/tests/functions.sh"

"$PYTHON" -c "
import sys
sys.stdout.buffer.write(b''.join(b'%015d\n' % i for i in range(1 << 16)))
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

serve "$tmp/sock1" serialize_requests
nbdcopy --connections=4 --threads=4 --request-size=65536 \
  "nbd+unix:///?socket=$tmp/sock1" "$tmp/out" || fail "a copy through a serialized shared context failed"
cmp "$tmp/out" "$tmp/base" || fail "the copy differs from the base"
[ "$(wc -l < "$tmp/opens.serialize_requests")" -eq 1 ] ||
  fail "the plugin was opened $(wc -l < "$tmp/opens.serialize_requests") times"

serve "$tmp/sock2" parallel
if nbdcopy --connections=4 --threads=4 --request-size=65536 \
     "nbd+unix:///?socket=$tmp/sock2" "$tmp/out2" 2>/dev/null; then
  fail "control: no two reads at once in the parallel model"
fi
echo "control: reads at once in the parallel model, as expected"
