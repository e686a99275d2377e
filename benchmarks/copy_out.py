# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# What the pipeline's copy out costs the client that makes it.  The
# pipeline of benchmarks/run from its fast source (sparse-random 4G: the
# burst of guest-like writes, then the copy out to a file) for nbdkit's
# filter and for ours, each copied out by nbdcopy as users run it and by
# nbdcopy with glibc's allocator told to keep the memory it frees
# (GLIBC_TUNABLES, given to nbdcopy alone), beside qemu's peer as the
# report runs it.  nbdcopy allocates a buffer for every request and
# frees it; glibc hands part of that memory back to the kernel, and
# nbdcopy faults it in again, as often as the heap layout of the run
# decides.  Where a page fault is dear (a paravirtualized kernel) that
# is much of the copy's time and most of its spread
# (docs/performance.md).
#
# usage: copy_out.py --filter SO --distro-filter SO --work DIR [--rounds N]

import os
import resource
import statistics

from bench import (DISTRO, OURS, QEMU, paired_median, progress, remove_settled,
                   side_bench, side_parser)

SOURCE = ["sparse-random", "4G", "seed=42"]
# Every freed buffer stays in the heap: no mmap for any nbdcopy buffer,
# no trimming of the heap's top.
KEEP_MEMORY = ("glibc.malloc.mmap_threshold=33554432:"
               "glibc.malloc.trim_threshold=1073741824")
NBDCOPY, NBDCOPY_KEEPING = "nbdcopy", "nbdcopy, memory kept"
# peer, the client that copies out
RUNS = [(DISTRO, NBDCOPY), (OURS, NBDCOPY), (DISTRO, NBDCOPY_KEEPING),
        (OURS, NBDCOPY_KEEPING), (QEMU, "qemu-img convert")]


def nbdcopy(b, uri, out, keeping):
    """nbdcopy out of uri into a new file out; its seconds and the
    minor page faults it took (it is the only child that ends in
    between)."""
    env = dict(b.env, GLIBC_TUNABLES=KEEP_MEMORY) if keeping else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt
    seconds = b.copy_out(uri, out, env)
    return (seconds,
            resource.getrusage(resource.RUSAGE_CHILDREN).ru_minflt - before)


def measure(b, peer, client, out):
    """One pipeline of peer copied out by client: writes and copy-out
    seconds, and the client's minor faults (None for qemu-img)."""
    if peer == QEMU:
        return b.pipeline_one(QEMU, SOURCE, False, out) + (None,)
    uri, _ = b.serve(peer, SOURCE)
    writes = b.burst(uri)
    copy, faults = nbdcopy(b, uri, out, client == NBDCOPY_KEEPING)
    b.stop_all()
    remove_settled(out)
    return writes, copy, faults


def print_table(runs):
    print()
    print("| peer | copied out by | writes (s) | copy out (s) | copy out, "
          "fastest-slowest (s) | total (s) | client's minor faults |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for peer, client in RUNS:
        rows = runs[peer, client]
        copies = [r[1] for r in rows]
        faults = ("%.0f" % statistics.median(r[2] for r in rows)
                  if rows[0][2] is not None else "-")
        print("| %s | %s | %.2f | %.2f | %.2f-%.2f | %.2f | %s |" %
              (peer, client, statistics.median(r[0] for r in rows),
               statistics.median(copies), min(copies), max(copies),
               statistics.median(r[0] + r[1] for r in rows), faults))


def print_ratios(runs):
    """Totals of peers against ours, the median of the rounds' own
    ratios, for each way of copying out."""
    qemu = runs[QEMU, "qemu-img convert"]
    print()
    print("| copied out by | %s / %s | %s / %s |" % (QEMU, OURS, DISTRO, OURS))
    print("|---|---:|---:|")
    for client in (NBDCOPY, NBDCOPY_KEEPING):
        ours = [sum(r[:2]) for r in runs[OURS, client]]
        peers = ([sum(r[:2]) for r in qemu],
                 [sum(r[:2]) for r in runs[DISTRO, client]])
        print("| %s | %s |" % (client, " | ".join(
            "%.2f" % paired_median(peer, ours)
            for peer in peers)))


def main():
    ap = side_parser(rounds=6, runtime=4)
    ap.add_argument("--filter", required=True)
    ap.add_argument("--distro-filter", required=True)
    args, b = side_bench(ap)
    out = os.path.join(b.work, "out.img")
    runs = {run: [] for run in RUNS}
    try:
        for rnd in range(args.rounds):
            k = rnd % len(RUNS)
            for peer, client in RUNS[k:] + RUNS[:k]:
                runs[peer, client].append(measure(b, peer, client, out))
                progress("round %d | %s | %s: %.2f + %.2f s" %
                         ((rnd + 1, peer, client) +
                          runs[peer, client][-1][:2]))
    finally:
        b.stop_all()
        remove_settled(out)
    print_table(runs)
    print_ratios(runs)


if __name__ == "__main__":
    main()
