#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# What the export advertises: writable, multi-conn, write zeroes with
# fast zero (nbdkit 1.32's filter offers neither), trim, flush, FUA,
# extents, cache, and block size hints from cow-block-size.  Also shows
# that ./nbdkit resolves --filter=cow to this build in both spellings.
. "$abs_top_srcdir/tests/functions.sh"

for spelling in --filter=cow "--filter cow"; do
  # shellcheck disable=SC2086
  "$NBDKIT" -U - $spelling pattern 1M cow-block-size=256K \
    --run 'nbdinfo "$uri"' > "$tmp/info"
  for want in 'is_read_only: false' 'can_multi_conn: true' 'can_zero: true' \
              'can_fast_zero: true' 'can_trim: true' 'can_flush: true' \
              'can_fua: true' 'can_cache: true' 'block_size_minimum: 1' \
              'block_size_preferred: 262144'; do
    grep -q "$want" "$tmp/info" || fail "$spelling: nbdinfo lacks '$want'"
  done
done
cat > "$tmp/extents.py" <<'PY'
import os
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri(os.environ["uri"])
assert h.can_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
PY
"$NBDKIT" -U - --filter=cow pattern 1M \
  --run "uri=\$uri nbdsh -c 'exec(open(\"$tmp/extents.py\").read())'" ||
  fail "extents not advertised"
