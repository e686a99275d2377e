# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Sourced by every shell test: strict mode, a private scratch
# directory (also the overlay's $TMPDIR), and small helpers.

set -eu

: "${abs_top_builddir:?run the tests through make check}"
: "${abs_top_srcdir:?run the tests through make check}"

# nbdsh and the Python tests need the Debian python3 with the nbd module.
PATH=/usr/bin:/usr/sbin:$PATH
export PATH

NBDKIT="$abs_top_builddir/nbdkit"
# $system_nbdkit: the nbdkit ./nbdkit runs, itself, without this tree's
# filter, a sanitizer runtime or valgrind (for servers tests compare
# ours with).
: "${system_nbdkit:?run the tests through make check}"
NBDCOW="$abs_top_builddir/tools/nbdcow/nbdcow"
PYTHON=/usr/bin/python3
tests="$abs_top_srcdir/tests"

tmp=$(mktemp -d /var/tmp/cow-test.XXXXXX)
# Under check-valgrind, nbdcow runs under valgrind memcheck as nbdkit
# does (filters/cow/nbdkit.in), its logs beside nbdkit's.
if [ -n "${COW_VALGRIND_LOGDIR:-}" ]; then
  cat > "$tmp/nbdcow" <<EOF
#!/bin/sh
exec valgrind --tool=memcheck --quiet \\
  --log-file="$COW_VALGRIND_LOGDIR/nbdcow.%p.log" \\
  --leak-check=full --show-leak-kinds=definite \\
  --errors-for-leak-kinds=definite \\
  --suppressions="$abs_top_srcdir/tests/valgrind.supp" "$NBDCOW" "\$@"
EOF
  chmod +x "$tmp/nbdcow"
  NBDCOW=$tmp/nbdcow
fi
cleanup_cmds=
server_faults=
cleanup ()
{
  eval "$cleanup_cmds" || true
  rm -rf "$tmp"
  if [ -n "$server_faults" ]; then
    echo "FAIL: nbdkit:$server_faults" >&2
    exit 1
  fi
}
trap cleanup EXIT
# on_exit CMD: run CMD (before removing $tmp) when the test ends.
on_exit () { cleanup_cmds="$1; $cleanup_cmds"; }

TMPDIR="$tmp"
export TMPDIR

# fail MESSAGE: fails the test, showing the end of each server's
# messages (an abort or an assertion names its cause there).
fail ()
{
  local err
  echo "FAIL: $*" >&2
  for err in "$tmp"/*.err; do
    [ -s "$err" ] || continue
    echo "--- the last lines of $err:" >&2
    tail -n 20 "$err" >&2
  done
  exit 1
}
skip () { echo "SKIP: $*"; exit 77; }

# Python for nbdsh -c "$EXPECT_EIO" -c ...: expect_eio(WHAT, FN) fails
# the script unless FN() raises nbd.Error with errno EIO.
EXPECT_EIO='
def expect_eio(what, fn):
    try:
        fn()
    except nbd.Error as e:
        assert e.errno == "EIO", "%s: errno %s" % (what, e.errno)
        return
    raise AssertionError("%s succeeded while the base failed" % what)
'

# Python for nbdsh -c "$BY_NAME" -c ...: conn(SOCK, NAME) connects to
# export NAME on the Unix socket SOCK; refused(SOCK, NAME) is true when
# the server refuses NAME (failing the script unless with ENOENT), false
# when it serves it.
BY_NAME='
def conn(sock, name):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix(sock)
    return h
def refused(sock, name):
    try:
        conn(sock, name)
    except nbd.Error as e:
        assert e.errno == "ENOENT", "%r refused with %s" % (name, e.errno)
        return True
    return False
'

# instrumented: true when nbdkit runs under valgrind or a sanitizer
# runtime, where starting it is ten times slower: the crash and torture
# tests then take fewer rounds (the plain suite keeps them all).
instrumented () { [ -n "${sanitizer_preload:-}${COW_VALGRIND_LOGDIR:-}" ]; }

# dump_stacks PID: prints on stderr where each thread of PID waits,
# for a test about to kill a process that hung: every thread's
# backtrace with gdb where installed, else the kernel's view of each.
dump_stacks ()
{
  echo "threads of process $1, where they wait:" >&2
  if command -v gdb >/dev/null; then
    gdb -q -batch -p "$1" -ex 'thread apply all bt' >&2 2>&1 || :
    return
  fi
  for t in /proc/"$1"/task/*; do
    echo "thread ${t##*/} ($(cat "$t/comm" 2>/dev/null)):" \
      "$(cat "$t/wchan" 2>/dev/null)" >&2
    cat "$t/stack" >&2 2>/dev/null || :
  done
}

# running PID: true while process PID runs (not once it is a zombie).
running ()
{
  local state
  state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
  [ -n "$state" ] && [ "$state" != Z ]
}

# hangup_threads: --threads=1 for an nbdkit that aborts when a client
# hangs up while a worker thread of its connection still sends a reply
# and another has closed the socket (1.32.4 to 1.33.9: raw_send_socket,
# assertion 'sock >= 0', with no filter at all; fixed upstream by
# "server: Don't assert on send if client hangs up early"), else
# nothing.  One worker per connection avoids that server bug; many
# connections still drive as many threads through the filter.
hangup_threads ()
{
  case $("$system_nbdkit" --version) in
    "nbdkit 1.32."*|"nbdkit 1.33."[0-9]) echo --threads=1 ;;
  esac
}

# pick_seed: sets seed to $SEED if set, else to a random number, and
# says so, so that a failure replays with the same numbers (bash's
# $RANDOM seeded with it too):
# SEED=N make check TESTS=tests/test-....sh.
pick_seed ()
{
  seed=${SEED:-$RANDOM}
  RANDOM=$seed
  echo "seed $seed (replay with SEED=$seed)"
}

# rounds PLAIN INSTRUMENTED: how many rounds a crash test takes by
# default, PLAIN unless instrumented.
rounds () { if instrumented; then echo "$2"; else echo "$1"; fi; }

# expect_start_failure PATTERN NBDKIT-ARGS...: nbdkit must refuse to
# start, printing PATTERN (a grep -E regexp) on stderr.
expect_start_failure ()
{
  local pattern=$1 pid waited=0 status=0; shift
  "$NBDKIT" -U - "$@" --run true 2>"$tmp/err" &
  pid=$!
  while running "$pid" && [ "$waited" -lt 300 ]; do
    sleep 0.1
    waited=$(( waited + 1 ))
  done
  if running "$pid"; then
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    fail "nbdkit hung refusing: $*"
  fi
  wait "$pid" || status=$?
  [ "$status" -ne 0 ] || fail "nbdkit started with: $*"
  if ! grep -Eq -- "$pattern" "$tmp/err"; then
    cat "$tmp/err" >&2
    fail "no message matching '$pattern' for: $*"
  fi
  echo "refused as expected: $*: $(grep -E -- "$pattern" "$tmp/err" | head -1)"
}

# start_nbdkit SOCKET NBDKIT-ARGS...: serve in the background until the
# test ends, messages in SOCKET.err; returns once the socket accepts
# connections, which nbdkit says by writing its pidfile (a socket file
# is there from bind, before listen): so a pidfile left by an earlier
# server on SOCKET goes first.  It gets 30 seconds: under valgrind,
# beside another test, starting takes seconds.
start_nbdkit ()
{
  sock=$1; shift
  pidfile="$sock.pid"
  rm -f "$pidfile"
  "$NBDKIT" -f -U "$sock" -P "$pidfile" "$@" 2>"$sock.err" &
  on_exit "stop_nbdkit $! '$sock.err'"
  for _ in $(seq 300); do
    [ -S "$sock" ] && [ -s "$pidfile" ] && return 0
    sleep 0.1
  done
  fail "nbdkit did not start: $*"
}

# serve_views NBDKIT-ARGS...: start_nbdkit on $tmp/sock serving
# $tmp/base through the filter with views and changes views (@ and +),
# controlled on $tmp/ctl, once a client opened the default export.
serve_views ()
{
  rm -f "$tmp/sock" "$tmp/ctl"
  start_nbdkit "$tmp/sock" --filter=cow file "$tmp/base" \
    cow-view-separator=@ cow-changes-separator=+ cow-control="$tmp/ctl" "$@"
  nbdinfo --size "nbd+unix:///?socket=$tmp/sock" >/dev/null
}

# backup_day D: on a server from serve_views keeping its overlay, the
# export backed up into $tmp/b/D.qcow2 (checkpoint dD): an increment
# over the newest backup there by name, a full one if there is none.
backup_day ()
{
  local last
  last=$(cd "$tmp/b" && ls -1 -- *.qcow2 2>/dev/null | tail -1)
  ( cd "$tmp/b" &&
    "$NBDCOW" backup ${last:+--base="$last"} "$tmp/ctl" \
      "nbd+unix:///?socket=$tmp/sock" "d$1" "$1.qcow2" >/dev/null ) ||
    fail "day $1: the backup failed"
}

# view_keeping MIB: on a server from serve_views, MIB MiB written from
# offset 0 and flushed, view v made, as many written again and flushed:
# v alone keeps the first bytes.
view_keeping ()
{
  nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "
import os, subprocess
for _ in range(2):
    for at in range(0, $1 * 1048576, 1048576):
        h.pwrite(os.urandom(1048576), at)
    h.flush()
    if _ == 0:
        subprocess.run(['$NBDCOW', 'view', 'create', '$tmp/ctl', '', 'v'],
                       check=True, stdout=subprocess.DEVNULL)
"
}

# flip_bit FILE OFFSET [MASK]: the bits of MASK (0x10 by default) of
# FILE's byte at OFFSET flipped.
flip_bit ()
{
  "$PYTHON" -c '
import sys
with open(sys.argv[1], "r+b") as f:
    f.seek(int(sys.argv[2]))
    b = f.read(1)
    f.seek(int(sys.argv[2]))
    f.write(bytes([b[0] ^ int(sys.argv[3], 0)]))' "$1" "$2" "${3:-0x10}"
}

# stop_nbdkit PID ERRFILE: stops a server from start_nbdkit and waits
# for it (its overlay may sit on a filesystem the test unmounts next).
# A server still running 10 seconds after SIGTERM is killed, and fails
# the test, as does any sanitizer report in its messages.
stop_nbdkit ()
{
  if kill "$1" 2>/dev/null; then
    for _ in $(seq 100); do
      kill -0 "$1" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$1" 2>/dev/null; then
      dump_stacks "$1"
      kill -9 "$1" 2>/dev/null
      server_faults="$server_faults $2 (hung at exit)"
    fi
    wait "$1" 2>/dev/null || true
  fi
  if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error:|WARNING: ThreadSanitizer' "$2"; then
    cat "$2" >&2
    server_faults="$server_faults $2 (sanitizer report)"
  fi
}

# expect_exit STATUS PATTERN COMMAND...: COMMAND must exit with STATUS
# and print PATTERN (a grep -E regexp) on stdout or stderr.
expect_exit ()
{
  want=$1 pattern=$2; shift 2
  set +e
  "$@" >"$tmp/out" 2>&1
  got=$?
  set -e
  [ "$got" -eq "$want" ] || { cat "$tmp/out" >&2; fail "exit $got, not $want: $*"; }
  grep -Eq -- "$pattern" "$tmp/out" ||
    { cat "$tmp/out" >&2; fail "no message matching '$pattern' from: $*"; }
  echo "exit $got as expected: $*: $(grep -E -- "$pattern" "$tmp/out" | head -1)"
}

# has_plugin NAME, has_filter NAME: whether the nbdkit in use has that
# plugin or filter (an nbdkit built without curl or ssh lacks them).
has_plugin () { "$system_nbdkit" "$1" --dump-plugin >/dev/null 2>&1; }
has_filter () { "$system_nbdkit" --filter="$1" null --dump-plugin >/dev/null 2>&1; }

# requires_plugin NAME, requires_filter NAME: skip the test, saying
# why, where the nbdkit in use lacks it (as nbdkit's own tests do).
requires_plugin ()
{
  has_plugin "$1" || skip "$("$system_nbdkit" --version) has no $1 plugin"
}
requires_filter ()
{
  has_filter "$1" || skip "$("$system_nbdkit" --version) has no $1 filter"
}

# free_port: a TCP port of 127.0.0.1 free now.
free_port ()
{
  "$PYTHON" -c "
import socket
s = socket.socket()
s.bind(('127.0.0.1', 0))
print(s.getsockname()[1])"
}

# sshd_config PORT PIDFILE: makes $tmp/hostkey and $tmp/key, and prints
# the configuration of an sshd of the test's own: on 127.0.0.1:PORT,
# root logging in with $tmp/key only, sftp served.
sshd_config ()
{
  ssh-keygen -q -t ed25519 -N '' -f "$tmp/hostkey"
  ssh-keygen -q -t ed25519 -N '' -f "$tmp/key"
  cat <<CONF
Port $1
ListenAddress 127.0.0.1
HostKey $tmp/hostkey
PidFile $2
AuthorizedKeysFile $tmp/key.pub
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
Subsystem sftp internal-sftp
CONF
}

# A base file of SIZE bytes: random data with a hole in the middle.
make_base ()
{
  file=$1 size=$2
  head -c "$size" /dev/urandom > "$file"
  truncate -s "$size" "$file"
  third=$(( size / 3 ))
  if [ "$third" -gt 0 ]; then
    fallocate -p -o "$third" -l "$third" "$file"
  fi
}

# small_tmpfs DIR SIZE: makes DIR a tmpfs of SIZE, unmounted at exit;
# skips the test where none can be mounted.
small_tmpfs ()
{
  mkdir "$1"
  mount -t tmpfs -o size="$2" tmpfs "$1" 2>/dev/null ||
    skip "cannot mount a small tmpfs here"
  on_exit "umount '$1'"
}

# fill_state_is STATS STATE [NAME]: waits (up to 60 s) until the
# statistics file STATS gives the fill of export NAME ("" if omitted)
# as STATE, or fails saying where it stands.
fill_state_is ()
{
  local fill='.exports[] | select(.name == $name) | .fill'
  for _ in $(seq 300); do
    [ "$(jq -r --arg name "${3-}" "$fill.state" "$1" 2>/dev/null)" = "$2" ] &&
      return 0
    sleep 0.2
  done
  fail "the fill of \"${3-}\" is not $2: $(jq -c --arg name "${3-}" "$fill" "$1")"
}

# exit_ms SOCK: sends SIGTERM to the server of start_nbdkit on SOCK and
# prints the milliseconds until it had exited (15 s at most).
exit_ms ()
{
  local pid start
  pid=$(cat "$1.pid")
  start=$(date +%s%N)
  kill "$pid"
  for _ in $(seq 750); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.02
  done
  echo $(( ($(date +%s%N) - start) / 1000000 ))
}

# fill_retrying STATS N SECONDS: waits up to SECONDS until the
# statistics file STATS shows the default export's fill running,
# having tried a read N times again with the error filter's EIO, or
# fails saying where it stands.
fill_retrying ()
{
  local fill='.exports[0].fill'
  for _ in $(seq $(( $3 * 10 ))); do
    [ "$(jq -r "$fill.retries" "$1" 2>/dev/null)" -ge "$2" ] 2>/dev/null &&
      break
    sleep 0.1
  done
  jq -e "$fill | .state == \"running\" and .retries >= $2 and
         .error == \"Input/output error\"" "$1" >/dev/null ||
    fail "the fill is not trying again: $(jq -c "$fill" "$1")"
}

# handles_closed LOG: waits (up to 10 s) until every handle of the
# plugin opened is closed again, as nbdkit's log filter says in LOG.
handles_closed ()
{
  for _ in $(seq 50); do
    [ "$(grep -c ' Connect ' "$1")" -eq "$(grep -c ' Disconnect ' "$1")" ] &&
      return 0
    sleep 0.2
  done
  fail "plugin handles left open: $(grep -E ' (Connect|Disconnect) ' "$1" | cut -c1-80)"
}

# plugin_calls LOG: the calls of the plugin nbdkit's log filter records
# in LOG, but the preconnect nbdkit makes for every connection before
# it opens any filter.
plugin_calls () { grep -vc Preconnect "$1"; }

# no_plugin_call_since LOG COUNT MESSAGE: fails with MESSAGE and the
# first calls past COUNT unless LOG still records COUNT plugin calls.
no_plugin_call_since ()
{
  [ "$(plugin_calls "$1")" -eq "$2" ] ||
    fail "$3: $(grep -v Preconnect "$1" | tail -n +$(( $2 + 1 )) | head -5)"
}

# overlay_fds SOCK: the /proc paths of the (deleted) overlay files of
# the server started on SOCK, one per line, or nothing.  Only our names
# count: valgrind keeps files of its own in $TMPDIR.
overlay_fds ()
{
  for fd in /proc/"$(cat "$1.pid")"/fd/*; do
    case "$(readlink "$fd" || true)" in
      */nbdkit-cow-*" (deleted)") echo "$fd" ;;
    esac
  done
}

# overlay_bytes SOCK: the disk space the overlay files of that server
# take together.
overlay_bytes ()
{
  fds=$(overlay_fds "$1")
  [ -n "$fds" ] || fail "no overlay among the files of the server on $1"
  # shellcheck disable=SC2086 # one path per word
  stat -L -c %b $fds | awk '{ b += $1 } END { print b * 512 }'
}

# probe_base URI OFFSET: whether the filter at URI still reads the base
# at OFFSET.  Changes 12 bytes of $tmp/base there behind nbdkit's back
# and reads them through URI: prints "copied" if the filter returns
# what it returned before (the block is in the overlay, as data or as
# zeros), "base" if it returns the new bytes.
probe_base ()
{
  nbdsh -u "$1" -c "
before = h.pread(12, $2)
with open('$tmp/base', 'r+b') as f:
    f.seek($2)
    f.write(bytes(b ^ 0x5a for b in before))
after = h.pread(12, $2)
print('copied' if after == before else 'base')"
}

# extent_at URI OFFSET: the description nbdinfo --map gives the extent
# holding OFFSET ("data", "hole,zero", ...).
extent_at ()
{
  nbdinfo --map "$1" |
    awk -v o="$2" '$1 <= o && o < $1 + $2 { $1 = $2 = $3 = ""; sub(/^ +/, ""); print; exit }'
}

# expect_extent URI OFFSET WANT
expect_extent ()
{
  got=$(extent_at "$1" "$2")
  [ "$got" = "$3" ] || fail "extent at $2 is '$got', expected '$3'"
}

# expect_one_shared WHAT PER_CONNECTION SHARED: a copy out with four
# connections made PER_CONNECTION of WHAT (plugin handles, sessions)
# without cow-base-handles, at least four (the control), and SHARED
# with cow-base-handles=1, which must be one.
expect_one_shared ()
{
  echo "$1: $2 per connection, $3 shared"
  [ "$2" -ge 4 ] || fail "control: $2 $1 without cow-base-handles"
  [ "$3" -eq 1 ] || fail "cow-base-handles=1: $3 $1"
}
