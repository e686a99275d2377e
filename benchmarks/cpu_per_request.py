# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# What nbdkit spends on each request, peer by peer: its CPU time (user
# and system) and its context switches, from the rusage that wait4
# gives for the whole process once it has exited, over the requests
# fio made.  The cell is the one of the file-ceiling target: 4K random
# writes, 4 jobs, fast base, 64K blocks.  On 2 cores nbdkit and fio
# share the CPUs, so a peer's IOPS follow its CPU time per request
# (docs/performance.md).
#
# usage: cpu_per_request.py --filter SO --distro-filter SO --work DIR
#                           [--rounds N] [--runtime S]

import statistics

from bench import (DISTRO, FILE_NONE, KEPT, MEMORY_BASE, NONE, OURS, progress,
                   side_bench, side_parser)

PEERS = [NONE, FILE_NONE, DISTRO, OURS, KEPT]
FIELDS = [("iops", "IOPS", "%.0f"), ("cpu", "CPU µs / request", "%.1f"),
          ("user", "user µs", "%.1f"), ("system", "system µs", "%.1f"),
          ("voluntary", "voluntary switches / request", "%.2f"),
          ("involuntary", "involuntary", "%.2f")]


def measure(b, peer):
    """One fio run through a fresh server of peer; the figures per
    request of its nbdkit."""
    uri, p = b.serve(peer, MEMORY_BASE, block="64K")
    r = b.fio(uri, "randwrite", "4k", 4)
    b.stop_all()
    ru, requests = b.rusage[p.pid], r["requests"]
    return {"iops": r["iops"],
            "cpu": (ru.ru_utime + ru.ru_stime) * 1e6 / requests,
            "user": ru.ru_utime * 1e6 / requests,
            "system": ru.ru_stime * 1e6 / requests,
            "voluntary": ru.ru_nvcsw / requests,
            "involuntary": ru.ru_nivcsw / requests}


def main():
    ap = side_parser(rounds=8, runtime=5)
    ap.add_argument("--filter", required=True)
    ap.add_argument("--distro-filter", required=True)
    args, b = side_bench(ap)
    runs = {peer: [] for peer in PEERS}
    for rnd in range(args.rounds):
        k = rnd % len(PEERS)
        for peer in PEERS[k:] + PEERS[:k]:
            runs[peer].append(measure(b, peer))
        mine, ceiling = runs[OURS][-1], runs[FILE_NONE][-1]
        progress("round %d: %s / %s: IOPS %.2f, CPU per request %.2f "
                 "(user %+.1f µs, system %+.1f µs)" %
                 (rnd + 1, OURS, FILE_NONE, mine["iops"] / ceiling["iops"],
                  mine["cpu"] / ceiling["cpu"],
                  mine["user"] - ceiling["user"],
                  mine["system"] - ceiling["system"]))
    print()
    print("| peer | " + " | ".join(title for _, title, _ in FIELDS) + " |")
    print("|---|" + "---:|" * len(FIELDS))
    for peer in PEERS:
        print("| %s | " % peer + " | ".join(
            shown % statistics.median(r[key] for r in runs[peer])
            for key, _, shown in FIELDS) + " |")


if __name__ == "__main__":
    main()
