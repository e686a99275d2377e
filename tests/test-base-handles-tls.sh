#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-base-handles=1 and TLS.  A shared plugin handle sees TLS only
# under --tls=require; under --tls=on a client with TLS gets a handle
# of its own (said once), so that a plugin serving by TLS status still
# tells the two apart.  The plugin (nbdkit's eval plugin) serves bytes
# 'T' to handles opened with TLS and 'P' to the others: under --tls=on
# clients without TLS read P through one shared handle, each client
# with TLS reads T through its own; under --tls=require the clients
# share one handle, which sees TLS.
. "$abs_top_srcdir/tests/functions.sh"

printf 'alice:%s\n' "$("$PYTHON" -c 'import secrets; print(secrets.token_hex(32))')" \
  > "$tmp/psk"
chmod 0600 "$tmp/psk"

# serve SOCKET MODE: the eval plugin under --tls=MODE, its opens
# counted in SOCKET.opens.
serve ()
{
  start_nbdkit "$1" --tls="$2" --tls-psk="$tmp/psk" --filter=cow eval \
    cow-base-handles=1 get_size='echo 1M' \
    open="echo >> '$1.opens'; echo \$4" \
    pread='if [ "$2" = true ]; then b=T; else b=P; fi
           head -c "$3" /dev/zero | tr "\0" "$b"'
}

# read SOCKET TLS: a byte of the export, read with TLS (True) or not.
read1 ()
{
  nbdsh -c "
h = nbd.NBD()
if $2:
    h.set_tls(nbd.TLS_REQUIRE)
    h.set_tls_psk_file('$tmp/psk')
    h.set_tls_username('alice')
h.connect_unix('$1')
print(h.pread(1, 4096).decode())
"
}

serve "$tmp/on" on
got=$(read1 "$tmp/on" False)$(read1 "$tmp/on" True)$(read1 "$tmp/on" False)
got=$got$(read1 "$tmp/on" True)
echo "--tls=on: read $got (without, with, without, with TLS)"
[ "$got" = PTPT ] || fail "--tls=on: read $got, not PTPT"
[ "$(grep -c 'a client with TLS gets a plugin handle of its own' "$tmp/on.err")" -eq 1 ] ||
  fail "--tls=on: not said once: $(cat "$tmp/on.err")"
[ "$(wc -l < "$tmp/on.opens")" -eq 3 ] ||
  fail "--tls=on: $(wc -l < "$tmp/on.opens") opens, not 3 (one shared)"

serve "$tmp/req" require
got=$(read1 "$tmp/req" True)$(read1 "$tmp/req" True)$(read1 "$tmp/req" True)
[ "$got" = TTT ] || fail "--tls=require: read $got, not TTT"
[ "$(wc -l < "$tmp/req.opens")" -eq 1 ] ||
  fail "--tls=require: $(wc -l < "$tmp/req.opens") opens, not 1"
