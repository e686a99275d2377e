# Before/after figures for docs/performance.md: the filter built from
# an earlier commit against the one built here, interleaved, on the
# workloads each change was about.
#
# usage: before_after.py --before SO --after SO --work DIR [--rounds N]
#                        [--after-args 'KEY=VALUE ...']
#                        [--both-args 'KEY=VALUE ...']
# (benchmarks/before-after REV [ARGS [BOTH]] builds REV and runs this.)
# --after-args gives the after filter more parameters, e.g. cow-stats;
# --both-args gives them to both, e.g. cow-file to compare kept
# overlays.  A relative path in them lands in the scratch directory,
# which is emptied after every measurement.

import argparse
import os
import statistics

from bench import Bench, progress

# Parameters of --after-args whose relative paths go to the scratch dir.
PATH_PARAMS = ("cow-file", "cow-stats")

# name, slow base, cow-block-size, fio rw, bs, jobs
CASES = [
    ("4K random write, 4 jobs", False, "64K", "randwrite", "4k", 4),
    ("4K random write, 8 jobs", False, "64K", "randwrite", "4k", 8),
    ("4K random write, 8 jobs, 1M blocks", False, "1M", "randwrite", "4k", 8),
    ("4K random read, 4 jobs, 1M blocks", False, "1M", "randread", "4k", 4),
    ("64K sequential write, 4 jobs", False, "64K", "write", "64k", 4),
    ("4K random write, 4 jobs, slow base", True, "64K", "randwrite", "4k", 4),
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--before", required=True)
    ap.add_argument("--after", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runtime", type=int, default=4)
    ap.add_argument("--after-args", default="")
    ap.add_argument("--both-args", default="")
    args = ap.parse_args()
    args.quick = False
    os.makedirs(os.path.join(args.work, "tmp"), exist_ok=True)
    b = Bench(args)
    print("| workload | before (IOPS) | after (IOPS) | after / before |")
    print("|---|---:|---:|---:|")
    for name, slow, block, rw, bs, jobs in CASES:
        iops = {"before": [], "after": []}
        for _ in range(args.rounds):
            for which in ("before", "after"):
                delay = (["delay"], ["delay-read=1ms"]) if slow else ([], [])
                extra = extra_params(args.both_args, b.tmp)
                if which == "after":
                    extra += extra_params(args.after_args, b.tmp)
                b.nbdkit("srv", [getattr(args, which)] + delay[0],
                         ["memory", "1G"],
                         delay[1] + ["cow-block-size=" + block] + extra)
                r = b.fio("nbd+unix:///?socket=" + b.sock("srv"), rw, bs, jobs)
                b.stop_all()
                iops[which].append(r["iops"])
        before = statistics.median(iops["before"])
        after = statistics.median(iops["after"])
        progress("| %s | %.0f | %.0f | %.2f |" % (name, before, after,
                                                 after / before))


if __name__ == "__main__":
    main()
