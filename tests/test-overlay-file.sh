#!/usr/bin/env bash
# The overlay lives in $TMPDIR, mode 0600, already unlinked,
# close-on-exec, and sparse: a write far into a big disk does not
# allocate what lies before it.
. "$abs_top_srcdir/tests/functions.sh"

mkdir "$tmp/overlay"
TMPDIR=$tmp/overlay start_nbdkit "$tmp/sock" --filter=cow memory 100G
pid=$(cat "$tmp/sock.pid")
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c 'h.pwrite(b"x" * 65536, 50 * 2**30)'

found=$(overlay_fd "$tmp/sock")
case "$(readlink "$found" 2>/dev/null)" in
  "$tmp/overlay/nbdkit-cow-"*" (deleted)") ;;
  *) fail "no deleted overlay in $tmp/overlay among nbdkit's files" ;;
esac
if ls -A "$tmp/overlay" | grep -q '^nbdkit-cow-'; then
  fail "overlay still has a name"
fi
mode=$(stat -L -c %a "$found")
[ "$mode" = 600 ] || fail "overlay mode is $mode, not 600"
flags=$(awk '/^flags:/ { print $2 }' /proc/"$pid"/fdinfo/"${found##*/}")
(( 8#$flags & 8#2000000 )) || fail "overlay is not close-on-exec (flags $flags)"
blocks=$(stat -L -c %b "$found")
(( blocks * 512 <= 1024 * 1024 )) || fail "overlay not sparse: $blocks blocks"
echo "overlay $found: mode $mode, flags $flags, $blocks blocks"
