#!/usr/bin/env bash
# The fill never copies another export's data into a named export's
# overlay: before nbdkit 1.44 its shared handle of the plugin is opened
# without the export's name, which reaches the default export, so a
# named export's fill stops, failed, saying why, and its reads go on
# to the plugin; from 1.44 on it completes.  Either way the named
# export reads its own data, and the default export is filled.
. "$abs_top_srcdir/tests/functions.sh"
requires_plugin eval

M=$(( 1024 * 1024 ))
stats=$tmp/stats.json
# Each export reads as the first letter of its name, the default
# export as D.
start_nbdkit "$tmp/sock" --filter=cow eval \
  open='n=$3; echo "${n:-D}"' get_size="echo $(( 4 * M ))" \
  pread='head -c "$3" /dev/zero | tr "\0" "$(printf %.1s "$2")"' \
  cow-fill=true cow-stats="$stats"
nbdsh -u "nbd+unix:///foo?socket=$tmp/sock" -c 'h.pwrite(b"w" * 4096, 0)'
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c 'h.pwrite(b"w" * 4096, 0)'
fill_state_is "$stats" complete
state=
for _ in $(seq 150); do
  state=$(jq -r '.exports[] | select(.name == "foo") | .fill.state' "$stats")
  case $state in complete|failed) break ;; esac
  sleep 0.2
done
case $state in
  complete) ;;
  failed)
    grep -q 'cow-fill: export "foo": nbdkit .* opens the fill.s handle of the plugin without an export name' \
      "$tmp/sock.err" || fail "the fill of foo failed unsaid: $(cat "$tmp/sock.err")"
    ;;
  *) fail "the fill of foo is $state" ;;
esac
echo "the fill of foo: $state"
nbdsh -u "nbd+unix:///foo?socket=$tmp/sock" -c "
got = h.pread(4 * $M, 0)
assert got == b'w' * 4096 + b'f' * (4 * $M - 4096), set(got)
" || fail "export foo reads another export's data"
nbdsh -u "nbd+unix:///?socket=$tmp/sock" -c "
assert h.pread(4 * $M, 0) == b'w' * 4096 + b'D' * (4 * $M - 4096)
" || fail "the default export reads wrong"
