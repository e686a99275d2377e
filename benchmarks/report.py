# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# Turns benchmarks/results/results.json into report.md and PNG charts
# in the same directory, and checks the targets of the performance
# issue against the figures of that one run.  Exits 1 if a target is
# missed.
#
# usage: report.py DIR

import json
import os
import statistics
import subprocess
import sys

from bench import (BK_ALONE, BK_KEPT_READER, BK_KEPT_VIEW, BK_QEMU,
                   BK_READER, BK_VIEW, BACKUP_JOBS,
                   COR_ALONE, DISK, DISTRO, FAST1M, FAST64, FILE_NONE,
                   FILL_ON, FILL_PACED, FIRST_WRITES, FIRST_WRITES_BASE,
                   FW_OURS, FW_OURS_4K, FW_QEMU_SUB, KEPT, NONE, ONE_PASS,
                   SLOW_READ, paired_median,
                   NONE_AGAIN, OURS, OURS_COMMIT,
                   OURS_EXPORT, OURS_KEEP, PEERS, QEMU, QEMU_COMMIT,
                   QEMU_KEEP, RECIPE_DIFF, RECIPE_EXPORT, VIEW_DIFF,
                   SCENARIOS, SERIAL, SLOW64, SLOW_DATA64, SW_FILE,
                   SW_FILE_AGAIN, SW_KEPT, SW_QEMU, SYNCED_WRITES,
                   WORKLOADS, GiveBack)


def fio_value(fio, scen, wl, jobs, peer, key="iops"):
    for r in fio:
        if (r["scenario"], r["workload"], r["jobs"], r["peer"]) == \
           (scen, wl, jobs, peer):
            return r[key]
    return None


def measured_workloads(fio, scen):
    """The workloads of WORKLOADS that fio ran in scen, in order."""
    return [wl for wl, _, _ in WORKLOADS
            if any(r["scenario"] == scen and r["workload"] == wl
                   for r in fio)]


def fio_tables(fio, scen):
    """The dm-snapshot shape: a row per number of jobs, a column per
    peer; one table each for IOPS, mean and p99 latency."""
    peers = [p for p in PEERS if any(r["peer"] == p and r["scenario"] == scen
                                     for r in fio)]
    jobs = sorted({r["jobs"] for r in fio if r["scenario"] == scen})
    out = []
    for wl in measured_workloads(fio, scen):
        out.append("#### %s\n" % wl)
        for key, title, fmt in (("iops", "IOPS", "%.0f"),
                                ("mean_us", "mean latency (µs)", "%.0f"),
                                ("p99_us", "p99 latency (µs)", "%.0f")):
            out.append("| jobs | " + " | ".join("%s %s" % (p, title)
                                                 for p in peers) + " |")
            out.append("|---:|" + "---:|" * len(peers))
            for j in jobs:
                cells = [fio_value(fio, scen, wl, j, p, key) for p in peers]
                out.append("| %d | " % j + " | ".join(
                    "-" if c is None else fmt % c for c in cells) + " |")
            out.append("")
    return out


def chart(fio, scen, path):
    """IOPS against jobs, one line per peer, one panel per workload."""
    peers = [p for p in PEERS if any(r["peer"] == p and r["scenario"] == scen
                                     for r in fio)]
    script = ['set terminal pngcairo size 1200,800 font ",10"',
              'set output "%s"' % path,
              'set multiplot layout 2,2 title "%s"' % scen,
              'set xlabel "fio jobs (iodepth 16 each)"', 'set ylabel "IOPS"',
              'set key top left', 'set grid', 'set logscale x 2',
              'set yrange [0:*]']
    for wl in measured_workloads(fio, scen):
        plots, data = [], []
        for p in peers:
            pts = [(r["jobs"], r["iops"]) for r in fio
                   if r["scenario"] == scen and r["workload"] == wl
                   and r["peer"] == p]
            plots.append("'-' with linespoints lw 2 title \"%s\"" % p)
            data += ["%d %f" % pt for pt in sorted(pts)] + ["e"]
        script += ['set title "%s"' % wl, "plot " + ", ".join(plots)] + data
    script.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True,
                   check=True)


def bars(rows, labels, fields, title, ylabel, path):
    """Grouped bars: one group per row label, one bar per field."""
    script = ['set terminal pngcairo size 1000,500 font ",10"',
              'set output "%s"' % path, 'set title "%s"' % title,
              'set ylabel "%s"' % ylabel, 'set style data histograms',
              'set style histogram rowstacked', 'set style fill solid 0.8',
              'set boxwidth 0.7', 'set grid ytics', 'set yrange [0:*]',
              'set key top left', 'set xtics rotate by -20']
    plots = ["'-' using 2:xtic(1) title \"%s\"" % f[1] for f in fields]
    script.append("plot " + ", ".join(plots))
    for key, _ in fields:
        for lab, r in zip(labels, rows):
            script.append('"%s" %f' % (lab, r[key]))
        script.append("e")
    subprocess.run(["gnuplot"], input="\n".join(script) + "\n", text=True,
                   check=True)


class Targets:
    def __init__(self):
        self.lines, self.missed = [], 0

    def check(self, what, value, op, goal, shown="%.2f", spread=None):
        """spread: the per-round values value is the median of."""
        ok = value is not None and (value >= goal if op == ">="
                                    else value <= goal)
        self.missed += not ok
        self.lines.append("| %s | %s | %s %s | %s |" %
                          (what, measured(value, shown, spread), op,
                           shown % goal, "met" if ok else "**MISSED**"))

    def control(self, what, value, shown="%.2f", spread=None,
                label="control"):
        """A figure shown beside the targets to tell their noise, not
        judged."""
        self.lines.append("| %s | %s | (%s) | not judged |" %
                          (what, measured(value, shown, spread), label))


def measured(value, shown, spread):
    """value as the report shows it: with the lowest and highest of
    the rounds it is the median of, if there were several."""
    if value is None:
        return "not measured"
    text = shown % value
    if spread and len(spread) > 1:
        text += " (%s-%s)" % (shown % min(spread), shown % max(spread))
    return text


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def scaling_ratios(res, scen, wl, me):
    """me's 8-jobs/1-job IOPS ratio over the ceiling's own, per round:
    the scaling loss the filter adds to what nbdkit and the machine
    lose anyway.  For NONE_AGAIN, the ceiling against itself: what
    noise alone makes of this figure."""
    mine = fio_ratios(res, scen, wl, (me, 8), (me, 1))
    ceiling = fio_ratios(res, scen, wl, (NONE, 8), (NONE, 1))
    if len(mine) != len(ceiling):
        return []
    return [m / c for m, c in zip(mine, ceiling)]


def fio_ratios(res, scen, wl, a, b):
    """IOPS of a over IOPS of b, a and b each a (peer, jobs): one ratio
    per round of the target runs, or, in results without them, the one
    of the tables' figures."""
    if not res.get("targets"):
        return [x for x in [ratio(fio_value(res["fio"], scen, wl, a[1], a[0]),
                                  fio_value(res["fio"], scen, wl, b[1], b[0]))]
                if x is not None]
    iops = {(r["peer"], r["jobs"], r["round"]): r["iops"]
            for r in res["targets"]
            if (r["scenario"], r["workload"]) == (scen, wl)}
    rounds = sorted({k[2] for k in iops})
    return [iops[a + (n,)] / iops[b + (n,)] for n in rounds
            if a + (n,) in iops and b + (n,) in iops]


def pipeline_ratios(rows, a, b):
    """Total time of peer a over peer b, on the pipeline rows of one
    source: one ratio per round, or, in results that kept only the
    round with the median total, the one of those."""
    row = {r["peer"]: r for r in rows}
    if a not in row or b not in row:
        return []
    if "all_s" not in row[a] or "all_s" not in row[b]:
        total = {p: row[p]["write_s"] + row[p]["copy_s"] for p in (a, b)}
        return [x for x in [ratio(total[a], total[b])] if x is not None]
    return [sum(ta) / sum(tb) for ta, tb in zip(row[a]["all_s"],
                                                row[b]["all_s"])]


def median(xs):
    return statistics.median(xs) if xs else None


def check_targets(res):
    """Every target for ours, and again for ours with cow-file if the
    run measured it."""
    t = Targets()
    for me in (OURS, KEPT):
        if any(r["peer"] == me for r in res["fio"] + res.get("targets", [])):
            check_targets_of(res, me, t)
    if res.get("tools"):
        check_tool_targets(res, t)
    if res.get("changes"):
        check_changes_targets(res, t)
    if res.get("fill"):
        check_fill_targets(res, t)
    if res.get("first_writes"):
        check_first_writes_targets(res, t)
    if res.get("synced_writes"):
        check_synced_writes_targets(res, t)
    if res.get("backups"):
        check_backups_targets(res, t)
    for row in res.get("give_back", []):
        check_give_back_targets(row, t)
    return t


def first_writes_rounds(res, workload):
    """Each peer's IOPS in every round of the first writes' workload."""
    return {r["peer"]: r["all_iops"] for r in res["first_writes"]
            if r["workload"] == workload}


def check_first_writes_targets(res, t):
    """4K writes into fresh blocks at the defaults against qcow2 with
    subclusters and against ours with 4K blocks (issue 76), judged on
    the median of the rounds' own ratios; 512-byte writes shown."""
    for wname, _ in FIRST_WRITES:
        runs = first_writes_rounds(res, wname)
        if not runs:
            continue
        pairs = [(FW_QEMU_SUB, 3), (FW_OURS_4K, 0.9)]
        for other, goal in pairs:
            what = ("first writes, %s: ours / %s" % (wname, other))
            value = paired_median(runs[FW_OURS], runs[other])
            spread = [a / b for a, b in zip(runs[FW_OURS], runs[other])]
            if wname == FIRST_WRITES[0][0]:
                t.check(what, value, ">=", goal, spread=spread)
            else:
                t.control(what, value, spread=spread, label="reported")


def check_synced_writes_targets(res, t):
    """Writes each followed by a flush into a fresh disk: a kept
    overlay against the file plugin's ceiling on every workload (0.95:
    one sync a flush, issue 98), and against qcow2, which syncs twice
    for a new cluster, on sequential 4K (issue 77) and on 64K writes
    (issue 98); random 4K writes against qcow2 shown."""
    for wname, rw, bs in SYNCED_WRITES:
        runs = {r["peer"]: r["all_iops"] for r in res["synced_writes"]
                if r["workload"] == wname}
        if not runs:
            continue
        qemu_goal = 1.5 if bs == "64k" else 1.2 if rw == "write" else None
        for other, goal in [(SW_QEMU, qemu_goal), (SW_FILE, 0.95)]:
            what = "synced writes, %s: ours, cow-file / %s" % (wname, other)
            value = paired_median(runs[SW_KEPT], runs[other])
            spread = [a / b for a, b in zip(runs[SW_KEPT], runs[other])]
            if goal is not None:
                t.check(what, value, ">=", goal, spread=spread)
            else:
                t.control(what, value, spread=spread, label="reported")
        t.control("synced writes, %s: the ceiling / the ceiling again" %
                  wname, paired_median(runs[SW_FILE], runs[SW_FILE_AGAIN]),
                  spread=[a / b for a, b in zip(runs[SW_FILE],
                                                runs[SW_FILE_AGAIN])])


def check_backups_targets(res, t):
    """A point-in-time view read while clients write (issues 78, 97),
    over a throw-away overlay and a kept one: the writes against the
    same writes beside a reader of the export, judged, and alone,
    shown; QEMU's fleecing shown; the bytes written to keep the view
    against those overwritten that it kept; the time to make a view of
    1 TiB."""
    r = res["backups"][0]
    runs = r["iops"]

    def ratio_of(what, a, b, judged):
        value = paired_median(runs[a], runs[b])
        spread = [x / y for x, y in zip(runs[a], runs[b])]
        if judged:
            t.check(what, value, ">=", 0.95, spread=spread)
        else:
            t.control(what, value, spread=spread, label="reported")

    for other, judged in [(BK_READER, True), (BK_ALONE, False)]:
        ratio_of("backups, client writes: reading a view / %s" % other,
                 BK_VIEW, other, judged)
    ratio_of("backups, client writes: %s / %s" % (BK_KEPT_VIEW,
                                                   BK_KEPT_READER),
             BK_KEPT_VIEW, BK_KEPT_READER, True)
    for view in (BK_VIEW, BK_KEPT_VIEW):
        ratio_of("backups, client writes: %s / %s" % (view, BK_QEMU),
                 view, BK_QEMU, False)
    for view in (BK_VIEW, BK_KEPT_VIEW):
        copied = [c / k if k else 0 for c, k in
                  zip(r["copied_bytes"][view], r["kept_bytes"][view])]
        t.check("backups, %s: bytes written to keep a view / bytes it kept"
                % view, median(copied), "<=", 1.0, spread=copied)
    for key, what in [("", "throw-away"), ("kept_", "kept in a file")]:
        t.check("backups: ms to make a view of 1 TiB, 1 GiB in its overlay, "
                + what, r[key + "make_ms"], "<=", 10.0)


def check_give_back_targets(row, t):
    """A view of a kept overlay deleted while a client writes (issue
    105): the worst write completion against the worst beside a reader
    of the export, round by round, and the deletion's time, its worst
    round."""
    rounds = row["rounds"]
    mib = row["kept_bytes"] >> 20
    ratios = [d["max_us"] / r["max_us"] for d, r in
              zip(rounds[GiveBack.DELETE], rounds[GiveBack.READER])]
    t.check("give-back, %d MiB kept: worst write deleting the view / "
            "worst write beside a reader" % mib, median(ratios), "<=", 1.2,
            spread=ratios)
    t.check("give-back, %d MiB kept: seconds the deletion took (worst "
            "round)" % mib,
            max(d["delete_s"] for d in rounds[GiveBack.DELETE]), "<=", 1.0)


def check_changes_targets(res, t):
    """The diff through the changes view against the recipe it
    replaces (issue 64)."""
    rows = {r["peer"]: r for r in res["changes"]}
    view = rows.get(VIEW_DIFF)
    t.check("diff of %g MiB changed through the changes view: bytes read "
            "/ bytes changed" % (view["changes"] / 2**20),
            view["read_bytes"] / view["changes"], "<=", 1.05)
    t.check("the same: %s time / %s" % (RECIPE_DIFF, VIEW_DIFF),
            ratio(rows[RECIPE_DIFF]["seconds"], view["seconds"]), ">=", 10)


def check_fill_targets(res, t):
    """The pipeline over a slow source with the fill against one pass
    over the source, and the client's reads under the fill against
    cow-on-read alone."""
    rows = {r["peer"]: r for r in res["fill"]}
    fill, paced = rows[FILL_ON], rows[FILL_PACED]
    alone, one = rows[COR_ALONE], rows[ONE_PASS]
    for r in (fill, paced):
        t.check("pipeline over a slow source, %s: total / one pass over "
                "the source" % r["peer"], r["seconds"] / one["seconds"],
                "<=", 1.25)
        t.check("pipeline, %s: bytes read from the source / its data" %
                r["peer"], r["source_bytes"] / r["data_bytes"], "<=", 1.05)
    for r in (fill, paced):
        for q in ("p50", "p99"):
            t.check("client reads while %s runs: %s / %s without" %
                    (r["peer"], q, q),
                    r["read_%s_ms" % q] / alone["read_%s_ms" % q], "<=", 1.5)


def check_tool_targets(res, t):
    """nbdcow against what a qcow2 user runs for the same (issue 23)."""
    secs = {r["peer"]: r["seconds"] for r in res["tools"]}
    gib = res["tools"][0]["changes"] / 2**30
    t.check("commit of %g GiB of scattered changes: %s time / %s" %
            (gib, QEMU_COMMIT, OURS_COMMIT),
            ratio(secs.get(QEMU_COMMIT), secs.get(OURS_COMMIT)), ">=", 1.2)
    t.check("the same without emptying the overlay: %s time / %s" %
            (QEMU_KEEP, OURS_KEEP),
            ratio(secs.get(QEMU_KEEP), secs.get(OURS_KEEP)), ">=", 1.2)
    t.check("export of the same as qcow2: %s time / %s" %
            (RECIPE_EXPORT, OURS_EXPORT),
            ratio(secs.get(RECIPE_EXPORT), secs.get(OURS_EXPORT)), ">=", 1.5)


def scaling_cells(res, me):
    """The per-round scaling ratios of me, for each scenario and
    workload measured: (where, ratios)."""
    cells = []
    for scen, _, _, _, _ in SCENARIOS:
        for wl, _, _ in WORKLOADS:
            rs = scaling_ratios(res, scen, wl, me)
            if rs:
                cells.append(("%s, %s" % (scen, wl), rs))
    return cells


def worst_scaling(cells):
    """Of scaling_cells, the per-round ratios of the cell whose median
    is lowest, and where that is."""
    worst, where = None, ""
    for cell, rs in cells:
        if worst is None or median(rs) < median(worst):
            worst, where = rs, cell
    return worst, where


def pooled_scaling(cells, me, t):
    """Beside the worst cell, what every cell of me's scaling_cells
    says: the median of all their rounds' ratios, and how many cells
    meet the rule, for the planning of docs/performance.md.  Not judged."""
    pooled = [x for _, rs in cells for x in rs]
    passing = sum(median(rs) >= 0.95 for _, rs in cells)
    t.control("scaling, %s, pooled: every round of every cell (%d of %d "
              "cells at >= 0.95)" % (me, passing, len(cells)),
              median(pooled), label="pooled")


def check_targets_of(res, me, t):
    rw4, rr4 = WORKLOADS[0][0], WORKLOADS[1][0]
    # what, scenario, workload, the peer ours is divided by, goal
    ratios = [
        ("4K random write, 4 jobs, fast base", FAST64, rw4, NONE, 0.9),
        ("4K random write, 4 jobs, fast base", FAST64, rw4, FILE_NONE, 1.0),
        ("4K random write, 4 jobs, fast base", FAST64, rw4, DISTRO, 2.3),
        ("4K random write, 4 jobs, slow base", SLOW64, rw4, DISTRO, 10),
        ("4K random write, 4 jobs, slow base of data", SLOW_DATA64[0], rw4,
         DISTRO, 10),
        ("4K random read, 4 jobs, 1M blocks", FAST1M, rr4, NONE, 0.9),
    ]
    for what, scen, wl, peer, goal in ratios:
        rs = fio_ratios(res, scen, wl, (me, 4), (peer, 4))
        t.check("%s: %s / %s" % (what, me, peer), median(rs), ">=", goal,
                spread=rs)
        if peer != NONE or me != OURS:      # the control once, for both
            continue
        control = fio_ratios(res, scen, wl, (NONE_AGAIN, 4), (NONE, 4))
        if control:                         # the run measured it
            t.control("the same for %s / %s, the ceiling measured twice" %
                      (NONE_AGAIN, NONE), median(control), spread=control)
    cells = scaling_cells(res, me)
    worst, where = worst_scaling(cells)
    t.check("scaling, %s 8 jobs / 1 job over %s 8 jobs / 1 job, worst "
            "workload (%s)" % (me, NONE, where or "none measured"),
            median(worst), ">=", 0.95, spread=worst)
    control = scaling_cells(res, NONE_AGAIN)
    if control:                     # the run measured the control
        if me == OURS:              # once: it is the same for KEPT
            worst, where = worst_scaling(control)
            t.control("the same for %s, the ceiling measured twice, worst "
                      "workload (%s)" % (NONE_AGAIN, where), median(worst),
                      spread=worst)
        pooled_scaling(cells, me, t)
        if me == OURS:
            pooled_scaling(control, NONE_AGAIN, t)
    for src in sorted({r["source"] for r in res["pipeline"]}):
        rows = [r for r in res["pipeline"] if r["source"] == src]
        goals = [(QEMU, 1.2), (DISTRO, 1.0)]
        # One big lock costs only where the base has latency to overlap.
        if rows[0].get("slow", "1 ms" in src):
            goals.append((SERIAL, 1.9))
        for peer, goal in goals:
            rs = pipeline_ratios(rows, peer, me)
            t.check("pipeline from %s: %s time / %s" % (src, peer, me),
                    median(rs), ">=", goal, spread=rs)
    for r in res["zeroes"]:
        if r["peer"] == me:
            t.check("1 GiB in: data time / zeros time (%s)" % me,
                    ratio(r["data_s"], r["zero_s"]), ">=", 10)
            t.check("overlay after the zeros, MiB (%s; 4 MiB are data)" % me,
                    r["zero_overlay"] / 2**20, "<=", 4 + 0.0625)


def run_kind(res):
    """How the run was asked for, if not in full."""
    if res["quick"]:
        return "quick mode, "
    if res["fio"]:
        return ""
    if res["pipeline"]:
        return "--no-tables: every target, not the fio tables, "
    return "--targets-only, " if res.get("targets") else "--tools-only, "


def report(d):
    res = json.load(open(os.path.join(d, "results.json")))
    m = res["machine"]
    out = ["# Benchmark report", "",
           "Written by `benchmarks/run` (%s%.0f minutes); every figure below "
           "comes from that one run. Peers are interleaved: each "
           "measurement runs all of them one after another on fresh "
           "servers." % (run_kind(res), res["minutes"]), "",
           "## Machine", ""]
    out += ["- %s: %s" % (k, v) for k, v in m.items()]
    out += ["", "## Peers", "",
            "- **no filter**: the plugin alone, the ceiling.",
            "- **no filter, file**: nbdkit's file plugin serving a "
            "fresh sparse file on the overlay's filesystem, the second "
            "ceiling: what writing that filesystem directly costs.",
            "- **nbdkit cow**: nbdkit's own cow filter from the "
            "distribution's package, unpacked privately and loaded by path.",
            "- **qemu qcow2**: qemu-nbd serving a qcow2 overlay (64K "
            "clusters) whose backing file is the same base (nbdkit over "
            "NBD).",
            "- **ours**: this filter.",
            "- **ours, cow-file**: this filter keeping its overlay in a "
            "file (`cow-file=`).",
            "- **ours serialized**: this filter under nbdkit's noparallel "
            "filter with serialize=all-requests, the one-big-lock design."]
    if any(r["peer"] == NONE_AGAIN for r in res.get("targets", [])):
        out += ["- **no filter, again**: the ceiling once more in the "
                "target runs' cells that judge against it (the scaling "
                "cells%s), a control: its figure against the first is "
                "what noise alone makes of those targets." %
                (", 4K random writes and 4K random reads with 1M blocks"
                 if any(r["peer"] == NONE_AGAIN and r["jobs"] == 4
                        for r in res["targets"]) else "")]
    out += ["", "## Targets", ""]
    nrounds = len({r["round"] for r in res.get("targets", [])})
    if nrounds:
        out += ["The fio targets are judged on target runs: the cells "
                "each target compares, run again in %d rounds, the peers "
                "of a cell back to back in a rotated order.  Measured is "
                "the median of the per-round ratios, with the lowest and "
                "the highest round in brackets; the fio tables are best "
                "of 2 and only describe.  The base is nbdkit memory 1G, "
                "all holes until written, but for the slow base of data: "
                "nbdkit pattern 1G, all data, behind the same 1 ms delay, "
                "so that every peer must read the base for a first "
                "write." % nrounds, ""]
    out += ["| target | measured | goal | |", "|---|---:|---:|---|"]
    t = check_targets(res)
    out += t.lines
    if res["fio"]:
        out += fio_section(res, d)
    if res["pipeline"]:
        out += pipeline_section(res, d)
    if res["zeroes"]:
        out += zeroes_section(res)
    if res.get("shared_handles"):
        out += shared_handles_section(res)
    if res.get("tools"):
        out += tools_section(res)
    if res.get("changes"):
        out += changes_section(res)
    if res.get("fill"):
        out += fill_section(res)
    if res.get("first_writes"):
        out += first_writes_section(res)
    if res.get("synced_writes"):
        out += synced_writes_section(res)
    if res.get("backups"):
        out += backups_section(res)
    if res.get("give_back"):
        out += give_back_section(res)
    with open(os.path.join(d, "report.md"), "w") as f:
        f.write("\n".join(out) + "\n")
    return t.missed


def fio_section(res, d):
    rounds = max([r.get("rounds", 1) for r in res["fio"]], default=1)
    out = ["", "## fio (nbd engine, iodepth %d, %d s per measurement, "
           "base: nbdkit memory %s)" % (16, res["runtime"], "1G"), "",
           "Each figure is the best of %d rounds, the peers in a rotated "
           "order each round (benchmarks/README.md says why)." % rounds, ""]
    for i, (scen, _, _, _, _) in enumerate(SCENARIOS):
        if not any(r["scenario"] == scen for r in res["fio"]):
            continue
        png = "fio-%d.png" % (i + 1)
        chart(res["fio"], scen, os.path.join(d, png))
        out += ["### %s" % scen, "", "![%s](%s)" % (scen, png), ""]
        out += fio_tables(res["fio"], scen)
    return out


def pipeline_section(res, d):
    rows = res["pipeline"]
    out = ["## Pipeline", "",
           "A VM-shaped sparse source, a burst of guest-like random writes "
           "(fio, 4 jobs, 4K-1M) through the overlay, then a copy out to a "
           "file: `nbdcopy --connections=4` for the nbdkit peers, "
           "`qemu-img convert -W -m 16` from the qcow2 for qemu.  Each "
           "figure is the round with the median total of %d, the peers "
           "in a rotated order each round.%s%s" %
           (max(r.get("rounds", 1) for r in rows),
            "  After each peer its output is removed and the filesystem "
            "synced, not timed, so that no peer pays for the writeback of "
            "the one before (docs/performance.md)."
            if all(r.get("settled") for r in rows) else "",
            "  A target is the median of the rounds' own ratios of "
            "totals, with the lowest and the highest round in brackets."
            if all("all_s" in r for r in rows) else ""), "",
           "| source | peer | writes (s) | copy (s) | total (s) |",
           "|---|---|---:|---:|---:|"]
    for r in rows:
        out.append("| %s | %s | %.2f | %.2f | %.2f |" %
                   (r["source"], r["peer"], r["write_s"], r["copy_s"],
                    r["write_s"] + r["copy_s"]))
    bars(rows, ["%s / %s" % (r["peer"], r["source"][:13]) for r in rows],
         [("write_s", "writes"), ("copy_s", "copy")],
         "Pipeline time (lower is better)", "seconds",
         os.path.join(d, "pipeline.png"))
    return out + ["", "![pipeline](pipeline.png)"]


def zeroes_section(res):
    rounds = res["zeroes"][0].get("rounds", 1)
    how = ("One round." if rounds == 1 else
           "Each row is the round with the median data / zeros ratio of "
           "%d, the peers in a rotated order each round; the overlay "
           "columns are the largest any round left." % rounds)
    out = ["", "## Zeroes", "",
           "`nbdcopy --connections=4` of a 1 GiB image into the export over "
           "a non-zero base (nbdkit pattern; memory for no filter): once "
           "all data, once all zeros but its first 4 MiB.  " + how, "",
           "| peer | data in (s) | overlay after (MiB) | zeros in (s) | "
           "overlay after (MiB) | data / zeros |",
           "|---|---:|---:|---:|---:|---:|"]
    for r in res["zeroes"]:
        mib = lambda k: "-" if k not in r else "%.1f" % (r[k] / 2**20)
        out.append("| %s | %.2f | %s | %.2f | %s | %.1f |" %
                   (r["peer"], r["data_s"], mib("data_overlay"), r["zero_s"],
                    mib("zero_overlay"), r["data_s"] / r["zero_s"]))
    return out


def shared_handles_section(res):
    rows = res["shared_handles"]
    how = ("One round." if rows[0]["rounds"] == 1 else
           "The median of %d rounds, the rows in a rotated order each "
           "round, with the fastest and slowest round." % rows[0]["rounds"])
    out = ["", "## Shared plugin handles", "",
           "Over a plugin whose handles are costly (nbdkit's file plugin "
           "behind its delay filter: 1 s to open a handle, 2 ms more per "
           "read; and its noparallel filter: one request at a time per "
           "handle), `nbdcopy --connections=4 --threads=4` writes the "
           "first half of a %d MiB disk of data through the filter, then "
           "copies the disk out: half of it from the overlay, half from "
           "the plugin.  Opens are the plugin's in all, from cow-stats.  "
           "%s" % (rows[0]["mib"], how), "",
           "| base handles | writes (s) | copy out (s) | "
           "fastest-slowest (s) | plugin opens |", "|---|---:|---:|---:|---:|"]
    for r in rows:
        out.append("| %s | %.2f | %.2f | %.2f-%.2f | %d |" %
                   (r["row"], r["writes_s"], r["seconds"], r["fastest"],
                    r["slowest"], r["opens"]))
    return out


def rounds_said(rounds, order):
    """How many rounds a section's figures come from, and in what order
    its jobs ran."""
    if rounds == 1:
        return "One round."
    return "%d rounds, %s; the median counts." % (rounds, order)


def tools_section(res):
    r0 = res["tools"][0]
    out = ["", "## Kept overlays: commit and export", "",
           "A base of %g GiB of data (nbdkit random) and %g GiB of "
           "scattered 64K writes (fio randwrite, each block at most once, "
           "the same seed), kept once by ours (`cow-file`) and once in a "
           "qcow2 overlay (64K clusters) through qemu-nbd.  Commit: into a "
           "copy of the base, with `nbdcow commit --empty` and with "
           "`qemu-img commit` (which also empties the overlay), both "
           "flushing at the end; and again without emptying the overlay "
           "(`nbdcow commit`, `qemu-img commit -d`).  Emptying frees the "
           "overlay's space: on a filesystem mounted with `discard` "
           "(here: %s; journal: %s) each freed extent is a discard sent "
           "to the device, waited for where it is freed if the "
           "filesystem has no journal.  "
           "Export: `nbdcow export` against the "
           "recipe it replaces (nbdkit serving the live view, `qemu-img "
           "create -b` it, `qemu-img rebase` onto the base), each making "
           "a qcow2 file over the base.  %s" %
           (r0["size"] / 2**30, r0["changes"] / 2**30,
            res["machine"].get("overlay filesystem", "not recorded"),
            res["machine"].get("overlay journal", "not recorded"),
            rounds_said(len(r0["all_s"]), "the six in a rotated order")),
           "",
           "| what | peer | seconds (median) | every round |",
           "|---|---|---:|---|"]
    for r in res["tools"]:
        out.append("| %s | %s | %.2f | %s |" %
                   (r["what"], r["peer"], r["seconds"],
                    ", ".join("%.2f" % x for x in r["all_s"])))
    return out


def changes_section(res):
    r0 = res["changes"][0]
    out = ["", "## The changes, saved while nbdkit runs", "",
           "A base of %g GiB of data (nbdkit random) and %g MiB changed in "
           "runs of 1 MiB spread over it, kept by ours (`cow-file`).  Each "
           "job starts the server afresh and saves a qcow2 diff of the "
           "base: `qemu-img convert -B` of the changes view (`+`) against "
           "the recipe it replaces (`qemu-img create -b` the live export, "
           "`qemu-img rebase` onto the base).  Bytes read: what the filter "
           "read for the job (cow-stats), and of it from the base.  %s" %
           (r0["size"] / 2**30, r0["changes"] / 2**20,
            rounds_said(len(r0["all_s"]), "the two in turn first")),
           "", "| peer | seconds (median) | every round | bytes read | "
           "from the base |", "|---|---:|---|---:|---:|"]
    for r in res["changes"]:
        out.append("| %s | %.2f | %s | %d | %d |" %
                   (r["peer"], r["seconds"],
                    ", ".join("%.2f" % x for x in r["all_s"]),
                    r["read_bytes"], r["base_bytes"]))
    return out


def fill_section(res):
    r0 = res["fill"][0]
    out = ["", "## Filling in the background, over a slow source", "",
           "A source of %g MiB, 10 MiB of data and a hole in every 16 MiB, "
           "behind nbdkit's delay filter (%s a read) and rate filter "
           "(%s bits a second).  The pipeline: one client modifies the "
           "disk in place with %d scattered requests (two reads of 64 KiB, "
           "each timed, for each write of 4 KiB), %g ms apart for the "
           "conversion's work, then `nbdcopy "
           "--connections=4` copies it out.  The yardstick copies the "
           "source itself, once.  Source bytes: what the filter read from "
           "the source (cow-stats).  The paced fill: `%s`.  One round." %
           (r0["size"] / 2**20, r0["latency"], r0["rate"], r0["ops"],
            r0["think_ms"], r0["paced"]), "",
           "| peer | modify (s) | copy (s) | total (s) | source bytes | "
           "/ data | reads p50 (ms) | reads p99 (ms) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in res["fill"]:
        out.append("| %s | %.2f | %.2f | %.2f | %d | %.2f | %.2f | %.2f |" %
                   (r["peer"], r["modify_s"], r["copy_s"], r["seconds"],
                    r["source_bytes"], r["source_bytes"] / r["data_bytes"],
                    r["read_p50_ms"], r["read_p99_ms"]))
    return out


def iops_table(title, text, rows):
    """A section of one IOPS figure per workload and peer: its title,
    what was measured, and every round's figure beside the median."""
    out = ["", "## " + title, "", text, "",
           "| workload | peer | IOPS (median) | every round |",
           "|---|---|---:|---|"]
    for r in rows:
        out.append("| %s | %s | %.0f | %s |" %
                   (r["workload"], r["peer"], r["iops"],
                    ", ".join("%.0f" % x for x in r["all_iops"])))
    return out


def first_writes_section(res):
    r0 = res["first_writes"][0]
    return iops_table(
        "First writes, over a slow base of data",
        "fio's nbd engine, random writes, %d jobs x iodepth 16, %d s "
        "each, over nbdkit %s behind the delay filter (%s a read): "
        "nearly every write is the first into its block.  The qcow2 "
        "peers are qemu-nbd over the same delayed base, 64K clusters "
        "(2K subclusters with `extended_l2=on`).  %s" %
        (r0["jobs"], r0["runtime"], " ".join(FIRST_WRITES_BASE),
         SLOW_READ, rounds_said(len(r0["all_iops"]),
                                "the peers in a rotated order")),
        res["first_writes"])


def synced_writes_section(res):
    r0 = res["synced_writes"][0]
    return iops_table(
        "Synced writes, a flush after each",
        "fio's nbd engine, 1 job, iodepth 1, `fsync=1` (a flush after "
        "every write), %d s each, into a fresh %s disk (nbdkit memory "
        "as the base of the overlays); the kept overlay, the qcow2 "
        "overlay (qemu-nbd, 64K clusters) and the file plugin's file "
        "all on the same filesystem.  %s" %
        (r0["runtime"], DISK, rounds_said(len(r0["all_iops"]),
                                          "the peers in a rotated order")),
        res["synced_writes"])

def tail_ms(r, key, peer):
    """The backups cell's tail latency key of peer, the median of its
    rounds in ms, or "-" for a run made before it was measured."""
    if peer not in r.get(key, {}):
        return "-"
    return "%.1f" % (median(r[key][peer]) / 1000)


def backups_section(res):
    r = res["backups"][0]
    rounds = len(r["iops"][BK_VIEW])
    out = ["", "## Backups of a disk that keeps being written", "",
           "fio's nbd engine, 4K random writes, %d jobs x iodepth 16, "
           "%d s each, on a %s export whose overlay holds the whole disk "
           "(nbdkit null, filled from nbdkit pattern first; throw-away, "
           "or kept in a file where the peer says so), while "
           "nbdcopy reads, again and again, what the peer names; QEMU's "
           "peer is qemu-storage-daemon fleecing a raw copy of the same "
           "data (copy-before-write into a qcow2 scratch backed by it, "
           "snapshot-access over that; the copy-before-write node "
           "written, the snapshot-access node read).  %s" %
           (BACKUP_JOBS, r["runtime"], DISK,
            rounds_said(rounds, "the peers in a rotated order")), "",
           "| peer | write IOPS (median) | every round | worst write "
           "ms | 99.9th ms |", "|---|---:|---|---:|---:|"]
    for peer, iops in r["iops"].items():
        out.append("| %s | %.0f | %s | %s | %s |" % (
            peer, median(iops), ", ".join("%.0f" % x for x in iops),
            tail_ms(r, "max_us", peer), tail_ms(r, "p999_us", peer)))
    out += ["", "| what it cost to keep the view | bytes (median) |",
            "|---|---:|"]
    for view, store in [(BK_VIEW, "throw-away"), (BK_KEPT_VIEW, "kept")]:
        out += ["| ours, %s: bytes written to keep it (copied to complete "
                "units) | %d |" % (store, median(r["copied_bytes"][view])),
                "| ours, %s: bytes overwritten that the overlay held at its "
                "instant (kept by the view alone) | %d |" %
                (store, median(r["kept_bytes"][view]))]
    out += ["| QEMU: its scratch file | %d |" % median(r["scratch_bytes"]),
            ""]
    for key, what in [("", "throw-away"), ("kept_", "kept in a file")]:
        out.append("A view of a 1 TiB disk with 1 GiB in its overlay, %s: "
                   "made in %.2f ms, deleted in %.2f ms (medians of 9, "
                   "through the control socket)." %
                   (what, r[key + "make_ms"], r[key + "delete_ms"]))
    return out


def give_back_section(res):
    out = ["", "## A view's places given back while a client writes", "",
           "A kept overlay (nbdkit null, filled from nbdkit pattern) whose "
           "view keeps the bytes given, overwritten from nbdkit random "
           "after the view was made; fio's nbd engine writes 4K at random "
           "(one job, iodepth 8) while the view is deleted a second in "
           "(its places then go back in the background), or, the "
           "control, while nbdcopy reads the export again and again on "
           "the same overlay without a view; and, the filesystem's part, "
           "with no filter, nbdkit's file plugin serving a file while as "
           "many bytes of data are punched 64K at a time (as the "
           "give-back punches a block) from the same file or from "
           "another.  Completion latencies over fio's whole run.  %s" %
           rounds_said(len(res["give_back"][0]["rounds"][GiveBack.DELETE]),
                       "the peers in a rotated order"), "",
           "| view keeps | fio s | peer | worst write ms | 99.9th ms | "
           "IOPS | deletion returned in s | places back in s |",
           "|---:|---:|---|---:|---:|---:|---:|---:|"]
    for row in res["give_back"]:
        for peer in GiveBack.PEERS:
            rs = row["rounds"].get(peer)
            if not rs:
                continue        # a run from before the peer was added
            out.append("| %d MiB | %d | %s | %s | %s | %.0f | %s | %s |" % (
                row["kept_bytes"] >> 20, row["runtime"], peer,
                ", ".join("%.1f" % (r["max_us"] / 1000) for r in rs),
                ", ".join("%.1f" % (r["p999_us"] / 1000) for r in rs),
                median([r["iops"] for r in rs]),
                ", ".join("%.3f" % r["delete_s"] for r in rs
                          if "delete_s" in r),
                ", ".join("%.1f" % r["give_back_s"] for r in rs
                          if "give_back_s" in r)))
    out += ["", "The filesystem's own part: with no filter, the worst "
            "write while the file it writes is punched (64K at a time, as "
            "much as the view keeps), and while another file is, against "
            "the worst while nothing is, the median of the rounds' "
            "ratios:", ""]
    for row in res["give_back"]:
        alone = row["rounds"].get(GiveBack.UNPUNCHED)
        for peer, what in ((GiveBack.PUNCHED, "the same file"),
                           (GiveBack.PUNCHED_ELSEWHERE, "another file")):
            punched = row["rounds"].get(peer)
            if not (alone and punched):
                continue
            ratios = [a["max_us"] / b["max_us"]
                      for a, b in zip(punched, alone)]
            out.append("- %d MiB, %s: %.2f (%s)" % (
                row["kept_bytes"] >> 20, what, median(ratios),
                ", ".join("%.2f" % x for x in ratios)))
    return out


if __name__ == "__main__":
    missed = report(sys.argv[1])
    quick = json.load(open(os.path.join(sys.argv[1], "results.json")))["quick"]
    print("%d targets missed%s" % (missed, " (quick mode: measured too "
                                   "briefly to judge)" if quick else ""))
    sys.exit(1 if missed and not quick else 0)
