# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# What nbdkit executes per request, counted rather than timed: the
# instructions of its user space (valgrind's callgrind) and its system
# calls (strace), for two filters on before_after.py's cases.  Counts
# do not move with the machine's noise, nor between a PVM and a plain
# KVM guest: where the after filter's counts are the before one's or
# lower, a timed report made with the before one is not flattered by
# it (docs/performance.md).
#
# usage: counts.py --before SO --after SO --work DIR [--rounds N]
#                  [--requests N] [--before-args 'KEY=VALUE ...']
#                  [--after-args 'KEY=VALUE ...']
#                  [--both-args 'KEY=VALUE ...'] [--case NAME]...
#                  [--after-checkpoints N --nbdcow PROGRAM]
# (benchmarks/before-after --count REV [ARGS [BOTH]] builds REV and
# runs this.)
#
# Each run serves a case through a fresh nbdkit under the counting tool
# and sends it --requests fio requests in all (fewer where a sequential
# job reaches the end of its stretch).  callgrind counts from the
# moment the server listens to fio's end, over all of nbdkit's threads
# (its instrumentation is switched on and off around fio), so nbdkit's
# start and exit stay out.  strace counts every system call of the
# whole run; futex stays out of the totals, as how often threads wait
# depends on timing, which strace itself changes.
#
# --after-checkpoints N makes N checkpoints of the after filter's
# export before fio (its --after-args give it cow-control=ctl), to
# count what writes cost while checkpoints are alive: give both the
# same SO.  Both filters' exports are opened by one client first, so
# that the two runs differ by the checkpoints only.

import os
import signal
import statistics
import subprocess

from bench import progress, side_bench, side_parser
from before_after import CASES, add_filter_options, order, serve_case

REQUESTS = 8000
TIMING_DEPENDENT = {"futex"}


def stop(b, p):
    """Stops the server whose counting tool is process p with SIGTERM to
    the server itself, and waits until the tool has written its counts."""
    target = p.pid
    children = "/proc/%d/task/%d/children" % (p.pid, p.pid)
    if os.path.exists(children):            # strace runs nbdkit as its child
        with open(children) as f:
            kids = f.read().split()
        if kids:
            target = int(kids[0])
    os.kill(target, signal.SIGTERM)
    p.wait(timeout=600)
    b.stop_all()


def callgrind_argv(out):
    return ["valgrind", "--tool=callgrind", "--instr-atstart=no",
            "--callgrind-out-file=" + out]


def instrument(b, p, on):
    """Switches callgrind's counting in process p on or off."""
    subprocess.run(["callgrind_control", "-i", "on" if on else "off",
                    str(p.pid)], check=True, env=b.env, stdout=b.log,
                   stderr=b.log)


def uncompressed(names, text):
    """A name of callgrind's output: "(id) name" defines id, "(id)"
    refers to it."""
    if not text.startswith("("):
        return text
    ident, _, name = text.partition(")")
    if name.strip():
        names[ident] = name.strip()
    return names.get(ident)


def callgrind_counts(path, obj):
    """The instructions callgrind counted in all, and those of the code
    of the shared object obj itself (not of what it calls)."""
    names, current, own, total = {}, None, 0, 0
    call_cost = False
    with open(path) as f:
        for line in f:
            if line.startswith("totals:"):
                total = int(line.split()[1])
            elif line.startswith("ob="):
                current = uncompressed(names, line[3:].strip())
            elif line.startswith("cob="):     # may define a name too
                uncompressed(names, line[4:].strip())
            elif line.startswith("calls="):
                call_cost = True    # the next cost line is the callee's
            elif line[:1].isdigit() or line[:1] in "+-*":
                if not call_cost and current == obj:
                    own += int(line.split()[1])
                call_cost = False
    return total, own


def syscall_counts(path):
    """The calls of each system call in strace -c's summary at path."""
    calls = {}
    with open(path) as f:
        for line in f:
            fields = line.split()
            if (len(fields) >= 5 and fields[0][0].isdigit() and
                    fields[-1] != "total"):
                calls[fields[-1]] = int(fields[3])
    return calls


def counted_run(b, args, which, case, wrapper, out, parse,
                instrumented=False):
    """Serves case through the filter `which` under wrapper, which
    writes its counts to out, runs fio (with callgrind's
    instrumentation on around it if instrumented) and returns out
    parsed by parse, and the number of requests."""
    _, base, slow, block, rw, bs, jobs, synced = case
    uri, p = serve_case(b, args, which, base, slow, block, wrapper)
    make_checkpoints(b, args, which, uri)
    if instrumented:
        instrument(b, p, True)
    requests = b.fio(uri, rw, bs, jobs, args.requests,
                     synced=synced)["requests"]
    if instrumented:
        instrument(b, p, False)
    stop(b, p)
    counts = parse(out)
    os.unlink(out)
    return counts, requests


def make_checkpoints(b, args, which, uri):
    """Opens the export, and for the after filter makes
    --after-checkpoints checkpoints of it."""
    b.run(["nbdinfo", "--size", uri])
    if which != "after" or not args.after_checkpoints:
        return
    ctl = os.path.join(b.tmp, "ctl")
    for i in range(args.after_checkpoints):
        b.run([args.nbdcow, "checkpoint", "create", ctl, "", "c%d" % i])


def count_instructions(b, args, which, case):
    """Instructions per request of one run: in all, and in the filter."""
    out = os.path.join(b.work, "callgrind.out")
    so = os.path.realpath(getattr(args, which))
    (total, own), requests = counted_run(
        b, args, which, case, callgrind_argv(out), out,
        lambda path: callgrind_counts(path, so), instrumented=True)
    return total / requests, own / requests


def count_syscalls(b, args, which, case):
    """System calls per request of one run, by name."""
    out = os.path.join(b.work, "strace.out")
    calls, requests = counted_run(
        b, args, which, case, ["strace", "-f", "-c", "-o", out], out,
        syscall_counts)
    return {name: n / requests for name, n in calls.items()}


def differing(before, after):
    """The system calls whose count per request differs by more than
    1% and more than one call in a hundred requests, as "name
    before→after"."""
    names = sorted((set(before) | set(after)) - TIMING_DEPENDENT)
    return ", ".join(
        "%s %.2f→%.2f" % (n, before.get(n, 0), after.get(n, 0))
        for n in names if abs(after.get(n, 0) - before.get(n, 0)) >
        max(0.01, 0.01 * max(before.get(n, 0), after.get(n, 0)))) or "none"


def median_calls(runs):
    """Per name, the median of the runs' calls per request."""
    names = set().union(*runs)
    return {n: statistics.median(r.get(n, 0) for r in runs) for n in names}


def main():
    ap = side_parser(rounds=2, runtime=0)
    add_filter_options(ap, [c[0] for c in CASES])
    ap.add_argument("--requests", type=int, default=REQUESTS)
    ap.add_argument("--after-checkpoints", type=int, default=0)
    ap.add_argument("--nbdcow", default="tools/nbdcow/nbdcow")
    args, b = side_bench(ap)
    print("| workload | instructions / request, before | after "
          "| after / before | in the filter, before | after "
          "| system calls / request, before | after | calls that differ |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for case in CASES:
        if args.case and case[0] not in args.case:
            continue
        ins = {"before": [], "after": []}
        calls = {"before": [], "after": []}
        for rnd in range(args.rounds):
            for which in order(rnd):
                ins[which].append(count_instructions(b, args, which, case))
                calls[which].append(count_syscalls(b, args, which, case))
        total = {w: statistics.median(t for t, _ in ins[w]) for w in ins}
        own = {w: statistics.median(o for _, o in ins[w]) for w in ins}
        per_call = {w: median_calls(calls[w]) for w in calls}
        syscalls = {w: sum(v for n, v in per_call[w].items()
                           if n not in TIMING_DEPENDENT) for w in per_call}
        progress("| %s | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.2f "
                 "| %s |" % (case[0], total["before"], total["after"],
                             total["after"] / total["before"],
                             own["before"], own["after"],
                             syscalls["before"], syscalls["after"],
                             differing(per_call["before"],
                                       per_call["after"])))


if __name__ == "__main__":
    main()
