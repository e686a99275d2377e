# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Before/after figures for docs/performance.md: the filter built from
# an earlier commit against the one built here, interleaved, on the
# workloads each change was about: fio cases, then the pipeline.
#
# usage: before_after.py --before SO --after SO --work DIR [--rounds N]
#                        [--before-args 'KEY=VALUE ...']
#                        [--after-args 'KEY=VALUE ...']
#                        [--both-args 'KEY=VALUE ...']
#                        [--case NAME]...
# (benchmarks/before-after REV [ARGS [BOTH]] builds REV and runs this.)
# --case runs only the named cases (a name of CASES, or "pipeline"),
# in the order of CASES; without it, all.
# --after-args gives the after filter more parameters, e.g. cow-stats;
# --before-args the before one (with the same SO for both, two settings
# of one filter: --before-args cow-stripes=1 --after-args cow-stripes=8);
# --both-args gives them to both, e.g. cow-file to compare kept
# overlays.  A relative path in them lands in the scratch directory,
# which is emptied after every measurement.

import os
import statistics

from bench import (DATA_BASE, MEMORY_BASE, SLOW_READ, paired_median, progress,
                   remove_settled, side_bench, side_parser)

# Parameters of --after-args whose relative paths go to the scratch dir.
PATH_PARAMS = ("cow-control", "cow-file", "cow-stats")

# name, base, slow base, cow-block-size, fio rw, bs, jobs, synced (one
# request at a time, each write followed by a flush: Bench.fio)
CASES = [
    ("4K random write, 4 jobs", MEMORY_BASE, False, "64K", "randwrite", "4k",
     4, False),
    ("4K random write, 8 jobs", MEMORY_BASE, False, "64K", "randwrite", "4k",
     8, False),
    ("4K random write, 8 jobs, 1M blocks", MEMORY_BASE, False, "1M",
     "randwrite", "4k", 8, False),
    ("4K random read, 4 jobs, 1M blocks", MEMORY_BASE, False, "1M",
     "randread", "4k", 4, False),
    ("64K sequential write, 4 jobs", MEMORY_BASE, False, "64K", "write",
     "64k", 4, False),
    ("64K sequential write, 8 jobs, 1M blocks", MEMORY_BASE, False, "1M",
     "write", "64k", 8, False),
    ("1M sequential write, 1 job", MEMORY_BASE, False, "64K", "write",
     "1m", 1, False),
    ("1M sequential write, 8 jobs, 1M blocks", MEMORY_BASE, False, "1M",
     "write", "1m", 8, False),
    ("4K random write, 4 jobs, slow base", MEMORY_BASE, True, "64K",
     "randwrite", "4k", 4, False),
    ("4K random write, 4 jobs, slow base of data", DATA_BASE, True, "64K",
     "randwrite", "4k", 4, False),
    ("4K sequential write + flush, 1 job", MEMORY_BASE, False, "64K",
     "write", "4k", 1, True),
    ("4K random write + flush, 1 job", MEMORY_BASE, False, "64K",
     "randwrite", "4k", 1, True),
]


def extra_params(args, tmp):
    """Parameters as a list, relative paths of PATH_PARAMS in tmp."""
    params = []
    for arg in args.split():
        key, _, value = arg.partition("=")
        if key in PATH_PARAMS and not value.startswith("/"):
            arg = "%s=%s/%s" % (key, tmp, value)
        params.append(arg)
    return params


def own_params(args, which, tmp):
    """The parameters of the before or the after filter."""
    return (extra_params(args.both_args, tmp) +
            extra_params(getattr(args, which + "_args"), tmp))


def serve_case(b, args, which, base, slow, block, wrapper=()):
    """Serves a case's base through the before or the after filter,
    under wrapper if given; returns the URI and the server's process."""
    delay = (["delay"], ["delay-read=" + SLOW_READ]) if slow else ([], [])
    p = b.nbdkit("srv", [getattr(args, which)] + delay[0], base,
             delay[1] + ["cow-block-size=" + block] +
             own_params(args, which, b.tmp), wrapper)
    return "nbd+unix:///?socket=" + b.sock("srv"), p


def order(rnd):
    """Which filter runs first in round rnd: each in turn, as a run
    leaves the machine busier (writeback, freed memory) for the next."""
    return ("before", "after") if rnd % 2 == 0 else ("after", "before")


def medians(num, den):
    """Two peers' figures of the same rounds: the median of each, and
    the median of the rounds' own ratios num / den."""
    return (statistics.median(num), statistics.median(den),
            paired_median(num, den))


def add_filter_options(ap, cases):
    """The two filters, their parameters and the cases to run, for this
    tool and counts.py."""
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--before-args", default="")
    ap.add_argument("--after-args", default="")
    ap.add_argument("--both-args", default="")
    ap.add_argument("--case", action="append", default=[], choices=cases)


def main():
    ap = side_parser(rounds=4, runtime=4)
    add_filter_options(ap, [c[0] for c in CASES] + ["pipeline"])
    args, b = side_bench(ap)
    print("| workload | before (IOPS) | after (IOPS) | after / before "
          "| median of the rounds' after / before |")
    print("|---|---:|---:|---:|---:|")
    for name, base, slow, block, rw, bs, jobs, synced in CASES:
        if args.case and name not in args.case:
            continue
        iops = {"before": [], "after": []}
        for rnd in range(args.rounds):
            for which in order(rnd):
                uri, _ = serve_case(b, args, which, base, slow, block)
                r = b.fio(uri, rw, bs, jobs, synced=synced)
                b.stop_all()
                iops[which].append(r["iops"])
        after, before, paired = medians(iops["after"], iops["before"])
        progress("| %s | %.0f | %.0f | %.2f | %.2f |" %
                 (name, before, after, after / before, paired))
    if not args.case or "pipeline" in args.case:
        pipeline(b, args)


def pipeline(b, args):
    """The pipeline of benchmarks/run from its sparse-random source:
    the burst of guest-like writes, then nbdcopy out; seconds."""
    out = os.path.join(b.work, "out.img")
    secs = {which: [] for which in ("before", "after")}
    for rnd in range(args.rounds):
        for which in order(rnd):
            extra = own_params(args, which, b.tmp)
            b.nbdkit("srv", [getattr(args, which)],
                     ["sparse-random", "4G", "seed=42"], extra)
            uri = "nbd+unix:///?socket=" + b.sock("srv")
            secs[which].append((b.burst(uri), b.copy_out(uri, out)))
            b.stop_all()
            remove_settled(out)
    print()
    print("| pipeline, sparse-random 4G | before (s) | after (s) "
          "| before / after | median of the rounds' before / after |")
    print("|---|---:|---:|---:|---:|")
    steps = {"writes": lambda t: t[0], "copy out": lambda t: t[1],
             "total": sum}
    for step, seconds in steps.items():
        before, after, paired = medians([seconds(t) for t in secs["before"]],
                                        [seconds(t) for t in secs["after"]])
        progress("| %s | %.2f | %.2f | %.2f | %.2f |" %
                 (step, before, after, before / after, paired))


if __name__ == "__main__":
    main()
