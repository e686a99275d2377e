#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# cow-base-handles=1 over nbdkit's ssh plugin, against an sshd of the
# test's own on localhost: nbdcopy copies out with four connections
# over one SSH session (sshd accepts one login) where the filter
# without the parameter opens a session per client connection; the
# copy is the base.
. "$abs_top_srcdir/tests/functions.sh"
requires_plugin ssh

[ "$(id -u)" -eq 0 ] || skip "sshd needs root"
[ -x /usr/sbin/sshd ] || skip "no sshd (Debian's openssh-server)"

truncate -s 8M "$tmp/base"
printf 'over ssh' | dd of="$tmp/base" bs=1 seek=$(( 3 << 20 )) conv=notrunc \
  status=none
port=$(free_port)
sshd_config "$port" "$tmp/sshd.pid" > "$tmp/sshd_config"
# sshd's privilege separation directory, made only if missing.
if [ ! -d /run/sshd ]; then
  mkdir -m 0755 /run/sshd
  on_exit "rmdir /run/sshd"
fi
/usr/sbin/sshd -D -f "$tmp/sshd_config" -E "$tmp/sshd.log" &
on_exit "kill $!"
for _ in $(seq 100); do
  [ -s "$tmp/sshd.pid" ] && break
  sleep 0.1
done
[ -s "$tmp/sshd.pid" ] || fail "sshd did not start: $(cat "$tmp/sshd.log")"

# sessions HANDLES: serves the base over ssh with cow-base-handles=
# HANDLES (none for ""), copies it out with four connections, and sets
# $count to how many logins sshd accepted for it.
sessions ()
{
  local sock=$tmp/sock$1 before
  before=$(grep -c 'Accepted publickey' "$tmp/sshd.log" || true)
  start_nbdkit "$sock" --filter=cow ssh host=127.0.0.1 port="$port" \
    user=root identity="$tmp/key" path="$tmp/base" verify-remote-host=false \
    ${1:+cow-base-handles=$1}
  nbdcopy --connections=4 --threads=4 "nbd+unix:///?socket=$sock" "$tmp/out$1"
  cmp "$tmp/out$1" "$tmp/base" || fail "the copy differs, handles=$1"
  count=$(( $(grep -c 'Accepted publickey' "$tmp/sshd.log") - before ))
}

sessions ""
per_connection=$count
sessions 1
expect_one_shared "SSH sessions" "$per_connection" "$count"
