#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Non-boolean cow-on-cache / cow-on-read, and a relative cow-on-read
# path, stop nbdkit at start with the parameter and value named.
. "$abs_top_srcdir/tests/functions.sh"

expect_start_failure 'cow-on-cache=maybe' --filter=cow memory 1M cow-on-cache=maybe
expect_start_failure 'cow-on-cache=2' --filter=cow memory 1M cow-on-cache=2
expect_start_failure 'cow-on-read=maybe' --filter=cow memory 1M cow-on-read=maybe
expect_start_failure 'cow-on-read=relative/path.*absolute' \
  --filter=cow memory 1M cow-on-read=relative/path
expect_start_failure 'cow-on-read=\./x.*absolute' --filter=cow memory 1M cow-on-read=./x
for v in true false on off 1 0 yes no /nonexistent/path; do
  "$NBDKIT" -U - --filter=cow memory 1M cow-on-read="$v" cow-on-cache=true \
    --run 'nbdinfo --size "$uri"' >/dev/null || fail "cow-on-read=$v refused"
done
# One message, naming the parameter: nbdkit's own boolean parser would
# add one that names neither.
for p in cow-on-read cow-on-cache cow-fill; do
  errors=$("$NBDKIT" -U - --filter=cow memory 1M $p=maybe --run true 2>&1 |
           grep -c error || true)
  [ "$errors" -eq 1 ] || fail "$p=maybe: $errors error lines, not one"
done
