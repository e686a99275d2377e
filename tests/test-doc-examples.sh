#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Every command example of README.md and the two man pages runs as
# written, in order, each document in a fresh directory holding the
# files they name as the reader's own: disk.img, golden.img (a copy)
# and changes.cow (a kept overlay of disk.img).  tests/doc-examples.py
# says what an example is, and how one is marked as needing a command
# or as never run.  Only hosts change: the examples' web server and SSH
# server become local ones.  They run in private mount, PID and network
# namespaces, so that what they write in /tmp, /run and /srv and the
# ports they take are their own and nothing they start outlives them;
# each with bash -e, the errors of every command counting.
. "$abs_top_srcdir/tests/functions.sh"

[ "$(id -u)" -eq 0 ] || skip "private /tmp, /run and /srv need root"
command -v unshare >/dev/null || skip "no unshare (util-linux)"
has_plugin curl && has_plugin ssh || skip "the examples use the curl and ssh plugins"
has_filter xz || skip "the examples use the xz filter"
[ -x /usr/sbin/sshd ] || skip "no sshd (Debian's openssh-server)"
grep -qw overlay /proc/filesystems || skip "no overlay filesystem for a private /tmp"

# The commands as the documents name them: nbdkit and nbdcow installed,
# ./nbdkit and ./nbdcow in a build tree.
mkdir "$tmp/bin"
ln -s "$NBDKIT" "$tmp/bin/nbdkit"
ln -s "$NBDCOW" "$tmp/bin/nbdcow"
ssh_port=$(free_port)
sshd_config "$ssh_port" /run/sshd.pid > "$tmp/sshd_config"

docs=("$abs_top_srcdir/README.md" "$abs_top_srcdir/docs/nbdkit-cow-filter.pod"
      "$abs_top_srcdir/tools/nbdcow/nbdcow.pod")
for doc in "${docs[@]}"; do
  name=$(basename "$doc")
  mkdir -p "$tmp/examples/$name" "$tmp/work/$name"
  "$PYTHON" "$tests/doc-examples.py" "$doc" "$tmp/examples/$name" \
    > "$tmp/examples/$name.list"
  [ -s "$tmp/examples/$name.list" ] || fail "$name: no examples found"
  make_base "$tmp/work/$name/disk.img" $((64 << 20))
  cp "$tmp/work/$name/disk.img" "$tmp/work/$name/golden.img"
  "$NBDKIT" -U - --filter=cow file "$tmp/work/$name/disk.img" \
    cow-file="$tmp/work/$name/changes.cow" \
    --run 'nbdsh -u "$uri" -c "h.pwrite(b\"changed\" * 1000, 1 << 20)"'
  ln -s "$tmp/bin/nbdkit" "$tmp/bin/nbdcow" "$tmp/work/$name/"
done

# Inside the namespaces: private /tmp, /run and /srv, the local web and
# SSH servers, then each example.  Prints "DOC:LINE: ran" and what the
# example printed, or "DOC:LINE: not run: why".
cat > "$tmp/inside.sh" <<'EOF'
set -eu
ip link set lo up
# private DIR: DIR the examples' own: what is there stays readable
# (the build trees, the sanitizers' suppressions), what they write goes
# to an overlay that vanishes with them, and the names the examples use
# there start out free.
private ()
{
  mkdir -p "$tmp/overlay$1/upper" "$tmp/overlay$1/work"
  mount -t overlay overlay -o "lowerdir=$1,upperdir=$tmp/overlay$1/upper,workdir=$tmp/overlay$1/work" "$1"
}
private /tmp
private /run
private /srv
rm -rf $(cat "$tmp"/examples/*/*.sh |
         grep -o '/\(tmp\|run\|srv\)/[A-Za-z0-9._-]*' | sort -u)
rm -f /run/http.port
mkdir -p -m 0755 /run/sshd /srv/images
cp "$work_any/disk.img" /srv/images/disk.img

"$PYTHON" "$tests/http-range.py" /srv/images /run/http.port &
/usr/sbin/sshd -f "$tmp/sshd_config"
for _ in $(seq 100); do [ -s /run/http.port ] && break; sleep 0.1; done
http="http://127.0.0.1:$(cat /run/http.port)"
ssh="host=127.0.0.1 port=$ssh_port user=root identity=$tmp/key verify-remote-host=false"

for doc in $docs; do
  while read -r n line mark why; do
    case $mark in
      not-run) echo "$doc:$line: not run: $why"; continue ;;
      needs)
        if ! command -v "$why" >/dev/null; then
          echo "$doc:$line: not run: needs $why, not installed"; continue
        fi ;;
    esac
    sed -e "s|https://example.com|$http|g" -e "s|host=server|$ssh|g" \
      "$tmp/examples/$doc/$n.sh" > "$tmp/examples/$doc/$n.run"
    start=$(date +%s.%N)
    # xz's fastest preset: an example's xz -k of the 64 MiB disk takes
    # 7 s of a core so, not 27 (one block either way, as the xz filter
    # reads it the same).
    if ! (cd "$tmp/work/$doc" && PATH="$tmp/bin:$PATH" XZ_DEFAULTS=-0 timeout 300 \
            bash -e -o pipefail "$tmp/examples/$doc/$n.run") \
         > "$tmp/examples/$doc/$n.out" 2>&1; then
      echo "$doc:$line: FAILED:"
      sed 's/^/  | /' "$tmp/examples/$doc/$n.sh"
      sed 's/^/  > /' "$tmp/examples/$doc/$n.out"
      exit 1
    fi
    echo "$doc:$line: ran ($(echo "$(date +%s.%N) - $start" | bc | cut -c1-4) s)"
    sed 's/^/  > /' "$tmp/examples/$doc/$n.out"
  done < "$tmp/examples/$doc.list"
done
EOF
names=$(for doc in "${docs[@]}"; do basename "$doc"; done)
status=0
env ssh_port="$ssh_port" tmp="$tmp" tests="$tests" PYTHON="$PYTHON" docs="$(echo $names)" \
  work_any="$tmp/work/README.md" \
  unshare --mount --propagation private --pid --fork --mount-proc --net \
  bash "$tmp/inside.sh" > "$tmp/report" 2>&1 || status=$?
cat "$tmp/report"
[ "$status" -eq 0 ] || fail "an example failed"

ran=$(grep -c ': ran (' "$tmp/report" || true)
not_run=$(grep -c ': not run: ' "$tmp/report" || true)
echo "$ran examples ran, $not_run not run (marked)"
[ "$ran" -gt 0 ] || fail "no example ran"
