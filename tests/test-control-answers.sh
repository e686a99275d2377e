#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# nbdcow reads the control socket's answers through one reader, which
# never reads past an answer's end: answers cut short (a last line
# without its newline), too long, or not of the shape the server
# gives, from a socket that only looks like the server's, are refused
# with a message and exit status 3, as is a socket that never answers
# or closes at once; names are written as JSON strings.
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
    answer = answers.get(verb, 'error: unknown\\n')
    if answer == 'HANG':
        hung = c                # kept open, never answered
        continue
    c.sendall(answer.replace('\\n', '\n').encode())
    c.close()
PY
  on_exit "kill $! 2>/dev/null"
  for _ in $(seq 50); do [ -S "$tmp/fake" ] && return; sleep 0.1; done
  fail "the fake control socket did not start"
}

# A list whose last name has no newline.
fake 'list=ok\nb0\nb1'
expect_exit 3 'answer is cut short' \
  "$NBDCOW" backup --base=full.qcow2 "$tmp/fake" "$uri" b2 out.qcow2
[ ! -e out.qcow2 ] || fail "a refused backup left out.qcow2"
expect_exit 3 'answer is cut short' "$NBDCOW" checkpoint list "$tmp/fake" ""
fake 'list=ok\nb0\nb 1\n'
expect_exit 3 'names no checkpoint' "$NBDCOW" checkpoint list "$tmp/fake" ""

# A view cut short, with bytes kept that are no number or negative, or
# a state the server has none of.
fake 'view=ok\nb1\nlive\n0\n@b1'
expect_exit 3 'cut short' "$NBDCOW" view show "$tmp/fake" ""
for answer in 'ok\nb1\nlive\nmany\n@b1\n@b1+\n' 'ok\nb1\nlive\n-5\n@b1\n\n' \
              'ok\nb1\nzzz\n5\n@b1\n\n' 'ok\nb1\nlive\n5\n@b1\n'; do
  fake "view=$answer"
  expect_exit 3 'does not show a view' "$NBDCOW" view show --json "$tmp/fake" ""
done

# A view made, its export name missing, or an answer cut short.
for answer in 'ok\n' 'ok\nv1\nli'; do
  fake "view-create=$answer"
  expect_exit 3 "does not name the view's export|cut short" \
    "$NBDCOW" view create "$tmp/fake" "" v1
done

# An identity cut short.
fake 'list=ok\n' 'view-create=ok\n@b2\n' 'identify=ok\n\n'
expect_exit 1 'gives checkpoint "b2" no identity' \
  "$NBDCOW" backup "$tmp/fake" "$uri" b2 out.qcow2

# An answer longer than any the server gives, an error saying nothing,
# and no answer at all (NBDCOW_CONTROL_TIMEOUT seconds).
fake "list=ok\\n$(head -c 20000 /dev/zero | tr '\0' a)\\n"
expect_exit 3 'longer than' "$NBDCOW" checkpoint list "$tmp/fake" ""
fake 'list=error: \n'
expect_exit 1 'refused the command without saying why' \
  "$NBDCOW" checkpoint list "$tmp/fake" ""
fake 'list=HANG'
NBDCOW_CONTROL_TIMEOUT=1 expect_exit 3 'no answer from the server in 1 s' \
  "$NBDCOW" checkpoint list "$tmp/fake" ""

# A server that closes each connection at once, as one killed in the
# middle of a command: exit status 3 with a message every time, never
# death by SIGPIPE (the command written to a closed socket).
rm -f "$tmp/closing"
"$PYTHON" - "$tmp/closing" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
s.listen(64)
while True:
    s.accept()[0].close()
PY
on_exit "kill $! 2>/dev/null"
for _ in $(seq 50); do [ -S "$tmp/closing" ] && break; sleep 0.1; done
for _ in $(seq 20); do
  expect_exit 3 'cannot send the command|no answer from the server' \
    "$NBDCOW" checkpoint delete "$tmp/closing" "" k1
done

# Export names that need escaping in JSON.
fake 'list=ok\na.b\nc_1\n' 'view=ok\nv1\nlive\n7\nq"x\@v1\n\n'
"$NBDCOW" checkpoint list --json "$tmp/fake" 'q"x' > list.json
[ "$(jq -c '[.export, .checkpoints]' list.json)" = '["q\"x",["a.b","c_1"]]' ] ||
  fail "checkpoint list --json: $(cat list.json)"
"$NBDCOW" view show --json "$tmp/fake" "" > view.json
[ "$(jq -c '.view | [.name, .kept_bytes, .export]' view.json)" = \
  '["v1",7,"q\"x\\@v1"]' ] || fail "view show --json: $(cat view.json)"

# Names the answers cannot carry, refused before they are sent.
expect_exit 1 "holds a newline, which the control socket's answers cannot carry" \
  "$NBDCOW" checkpoint create "$tmp/ctl" "$(printf 'a\nb')" c1
expect_exit 1 "/ctl: the export's name or the view's is too long" \
  "$NBDCOW" view create "$tmp/ctl" "$(head -c 5000 /dev/zero | tr '\0' e)" v1
