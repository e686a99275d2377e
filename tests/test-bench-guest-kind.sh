#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The benchmark report names the guest's kind from the kernel log: the
# boot line "Hypervisor detected:" for any hypervisor, and on a PVM
# guest also the kvm_pvm module's later line, which outlives the boot
# line in a busy log; a log with neither names nothing.
. "$abs_top_srcdir/tests/functions.sh"

"$PYTHON" - "$abs_top_srcdir/benchmarks" <<'PY' || fail "guest kinds above"
import sys
sys.path.insert(0, sys.argv[1])
from bench import guest_kind_in_kernel_log as kind

cases = [
    ("[    0.000000] Hypervisor detected: KVM\n", "virtual machine (KVM)"),
    ("[    0.000000] Hypervisor detected: PVM\n", "paravirtualized (PVM)"),
    ("[    2.104233] kvm-pvm: this kernel is itself a kvm-pvm guest; "
     "not binding\n", "paravirtualized (PVM, from kvm_pvm's log line)"),
    ("[    0.000000] Hypervisor detected: PVM\n"
     "[    2.104233] kvm-pvm: this kernel is itself a kvm-pvm guest\n",
     "paravirtualized (PVM)"),
    ("[ 9000.1] EXT4-fs warning (device vda): ext4_end_bio:343: I/O error\n",
     None),
    ("", None),
]
bad = 0
for log, want in cases:
    got = kind(log)
    if got != want:
        print("FAIL: for %r: %r, expected %r" % (log, got, want))
        bad += 1
sys.exit(bad != 0)
PY
