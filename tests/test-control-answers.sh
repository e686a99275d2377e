#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow reads the control socket's answers through one reader, which
# never reads past an answer's end: answers cut short (a last line
# without its newline) or not of the shape the server gives, from a
# socket that only looks like the server's, are refused with a
# message, and names are written as JSON strings.
. "$abs_top_srcdir/tests/functions.sh"

M=$(( 1024 * 1024 ))
make_base "$tmp/base" $(( 4 * M ))
start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" cow-control="$tmp/ctl" \
  cow-view-separator=@ cow-changes-separator=+
uri="nbd+unix:///?socket=$tmp/sock"
cd "$tmp"
"$NBDCOW" backup "$tmp/ctl" "$uri" b1 full.qcow2 >/dev/null

# fake VERB=ANSWER...: a control socket at $tmp/fake answering each
# command by its verb (\n in ANSWER a newline), until the test ends.
fake ()
{
  rm -f "$tmp/fake"
  "$PYTHON" - "$tmp/fake" "$@" <<'PY' &
import os, socket, sys
answers = dict(a.split('=', 1) for a in sys.argv[2:])
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(8)
while True:
    c, _ = s.accept()
    request = b''
    while True:
        got = c.recv(65536)
        if not got:
            break
        request += got
    verb = request.split(b'\0')[0].decode()
    c.sendall(answers.get(verb, 'error: unknown').replace('\\n', '\n').encode())
    c.close()
PY
  on_exit "kill $! 2>/dev/null"
  for _ in $(seq 50); do [ -S "$tmp/fake" ] && return; sleep 0.1; done
  fail "the fake control socket did not start"
}

# A list whose last name has no newline: checkpoint "b1" is not in it.
fake 'list=ok\nb0\nb1'
expect_exit 1 'checkpoint "b1" of export "", which the server does not have' \
  "$NBDCOW" backup --base=full.qcow2 "$tmp/fake" "$uri" b2 out.qcow2
[ ! -e out.qcow2 ] || fail "a refused backup left out.qcow2"

# A view cut short, or with bytes kept that are no number.
fake 'view=ok\nb1\nlive\n0\n@b1'
expect_exit 3 'does not show a view' "$NBDCOW" view show "$tmp/fake" ""
fake 'view=ok\nb1\nlive\nmany\n@b1\n@b1+\n'
expect_exit 3 'does not show a view' "$NBDCOW" view show --json "$tmp/fake" ""

# An identity cut short.
fake 'view-create=ok\n@b2\n' 'identify=ok\nabc'
expect_exit 1 'gives checkpoint "b2" no identity' \
  "$NBDCOW" backup "$tmp/fake" "$uri" b2 out.qcow2

# Names that need escaping in JSON.
fake 'list=ok\na"b\nc\d\n' 'view=ok\nv"1\nlive\n7\n@v"1\n\n'
"$NBDCOW" checkpoint list --json "$tmp/fake" "" > list.json
[ "$(jq -c .checkpoints list.json)" = '["a\"b","c\\d"]' ] ||
  fail "checkpoint list --json: $(cat list.json)"
"$NBDCOW" view show --json "$tmp/fake" "" > view.json
[ "$(jq -c '.view | [.name, .kept_bytes]' view.json)" = '["v\"1",7]' ] ||
  fail "view show --json: $(cat view.json)"
