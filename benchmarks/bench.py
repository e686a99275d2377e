# SPDX-License-Identifier: BSD-3-Clause
# Copyright (C) 2026 the nbdkit-cow authors.
#
# The side-by-side benchmark suite.  benchmarks/run installs what it
# needs, builds the filter and runs this; see benchmarks/README.md.
#
# usage: bench.py --filter SO --distro-filter SO --nbdcow PROGRAM
#                 --out DIR [--quick]
#                 [--targets-only | --tools-only | --no-tables | --only CELL]
#
# Every measurement starts fresh servers (so every overlay starts
# empty) and the peers of one measurement run one after another,
# innermost, so that drift of the machine hits all of them alike.

import argparse
import ctypes
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

# Peers, in the order they appear in every table.  "ours, cow-file" is
# ours keeping its overlay in a file (cow-file=, issue 5), which must
# meet the same targets.  There are two ceilings: the base plugin alone,
# and nbdkit's file plugin serving a file on the overlay's filesystem
# (what writing that filesystem directly costs).
NONE, FILE_NONE, DISTRO, QEMU, OURS, KEPT, SERIAL = (
    "no filter", "no filter, file", "nbdkit cow", "qemu qcow2", "ours",
    "ours, cow-file", "ours serialized")
# The ceiling once more in the target runs' cells that judge a peer
# against it (the scaling cells and the ratio cells of no filter), a
# control: its figure against the ceiling is what noise alone makes of
# a peer that loses nothing.
NONE_AGAIN = "no filter, again"
PEERS = [NONE, FILE_NONE, DISTRO, QEMU, OURS, KEPT, SERIAL]
# Peers whose behaviour depends on cow-block-size, with the ceilings.
BLOCK_PEERS = [NONE, FILE_NONE, DISTRO, OURS, KEPT, SERIAL]
# The pipeline writes to its source, which the plugins alone refuse.
PIPELINE_PEERS = [DISTRO, QEMU, OURS, KEPT, SERIAL]
# The zeroes job copies into the export over a base of data.
ZEROES_PEERS = [NONE, DISTRO, QEMU, OURS, KEPT, SERIAL]

WORKLOADS = [  # name, fio rw, fio bs
    ("4K random write", "randwrite", "4k"),
    ("4K random read", "randread", "4k"),
    ("64K sequential write", "write", "64k"),
    ("1M sequential write", "write", "1m"),
]
DISK = "1G"
DISK_BYTES = 1 << 30
SLOW_READ = "1ms"
# The fio base: all holes until written.
MEMORY_BASE = ["memory", DISK]
# A base that is all data: the pattern plugin has no extents, so nbdkit
# reports every byte of it as data.
DATA_BASE = ["pattern", DISK]
SCENARIOS = [  # name, base, slow base, cow-block-size, peers
    ("fast base, 64K blocks", MEMORY_BASE, False, "64K", PEERS),
    ("slow base (1 ms reads), 64K blocks", MEMORY_BASE, True, "64K", PEERS),
    ("fast base, 4K blocks", MEMORY_BASE, False, "4K", BLOCK_PEERS),
    ("fast base, 1M blocks", MEMORY_BASE, False, "1M", BLOCK_PEERS),
]
FAST64, SLOW64, _, FAST1M = (s[0] for s in SCENARIOS)
# The slow-base target once more over a base of data, in target runs
# only.  Ours reads nothing from the holes of the memory base for a
# first write (docs/performance.md) while nbdkit's filter
# still does; over data both must read, so only this cell measures
# how the copy-ups of concurrent writes overlap.
SLOW_DATA64 = ("slow base of data (1 ms reads), 64K blocks", DATA_BASE, True,
               "64K", [DISTRO, OURS, KEPT])
# The fio cells each ratio target compares, measured again in target
# runs: scenario, workload, jobs, peers.  The scaling target adds every
# scenario and workload with 1 and 8 jobs (target_cells).
RATIO_CELLS = [
    (FAST64, WORKLOADS[0], 4,
     [NONE, FILE_NONE, DISTRO, OURS, KEPT, NONE_AGAIN]),
    (SLOW64, WORKLOADS[0], 4, [DISTRO, OURS, KEPT]),
    (SLOW_DATA64[0], WORKLOADS[0], 4, [DISTRO, OURS, KEPT]),
    (FAST1M, WORKLOADS[1], 4, [NONE, OURS, KEPT, NONE_AGAIN]),
]
TARGET_ROUNDS = 5
# Rounds of every pipeline; its targets are the median of the rounds'
# own ratios, as the fio targets are.
PIPELINE_ROUNDS = 5
# The peers of the kept-overlay tools (class Tools).
OURS_COMMIT, QEMU_COMMIT = "nbdcow commit --empty", "qemu-img commit"
# The same without emptying the overlay: what the copy itself costs.
OURS_KEEP, QEMU_KEEP = "nbdcow commit", "qemu-img commit -d"
OURS_EXPORT, RECIPE_EXPORT = ("nbdcow export",
                              "nbdkit + qemu-img create -b + rebase")
# The peers of the diff saved from a running server (class ChangesView).
VIEW_DIFF, RECIPE_DIFF = ("qemu-img convert -B of the changes view",
                          "qemu-img create -b + rebase")
# The peers of the background fill (class Fill), and its yardstick.
FILL_ON, FILL_PACED, COR_ALONE, NEITHER, ONE_PASS = (
    "ours, cow-fill", "ours, cow-fill paced", "ours, cow-on-read alone",
    "ours, neither", "one pass over the source (nbdcopy, no filter)")
SOURCE_LATENCY = "1ms"  # per read of the slow source
SOURCE_RATE = "400M"    # its bandwidth, bits a second (rate filter)
# The paced fill: its reads of the source capped at four fifths of the
# source's bandwidth (50 MiB/s), as for a source shared with others.
FILL_PACE = ["cow-fill=true", "cow-fill-rate=40M"]
# The peers of the first writes (class FirstWrites): small writes into
# blocks not yet in the overlay, over a large base of data behind the
# delay filter.
FW_OURS, FW_OURS_4K, FW_QEMU_SUB, FW_QEMU = (
    "ours", "ours, cow-block-size=4K", "qemu qcow2, extended_l2=on",
    "qemu qcow2")
FIRST_WRITES_PEERS = [FW_OURS, FW_OURS_4K, FW_QEMU_SUB, FW_QEMU]
FIRST_WRITES = [  # name, fio bs
    ("4K random write", "4k"),
    ("512-byte random write", "512"),
]
FIRST_WRITES_BASE = ["pattern", "64G"]
FIRST_WRITES_JOBS = 4
JOBS = [1, 2, 4, 8]
IODEPTH = 16
# The peers of the synced writes (class SyncedWrites): each write
# followed by a flush, one at a time, into a fresh disk, every file on
# the same filesystem.
# The ceiling runs twice, the second as a control of the noise.
SW_FILE, SW_QEMU, SW_KEPT, SW_FILE_AGAIN = (
    "nbdkit file plugin, no filter (the ceiling)",
    "qemu-nbd, qcow2 overlay", "ours, cow-file", "the ceiling, again")
SYNCED_WRITES_PEERS = [SW_FILE, SW_QEMU, SW_KEPT, SW_FILE_AGAIN]
BK_ALONE, BK_READER, BK_VIEW, BK_QEMU = (
    "ours, no view, no reader", "ours, no view, nbdcopy reading the export",
    "ours, nbdcopy reading a point-in-time view",
    "qemu fleecing (copy-before-write), nbdcopy reading snapshot-access")
BK_KEPT_READER, BK_KEPT_VIEW = (
    "ours kept (cow-file), no view, nbdcopy reading the export",
    "ours kept (cow-file), nbdcopy reading a point-in-time view")
BK_CYCLE, BK_KEPT_CYCLE = (
    "ours, backup cycles (a view made, read whole by nbdcopy, deleted)",
    "ours kept (cow-file), backup cycles (a view made, read whole by "
    "nbdcopy, deleted)")
BACKUP_PEERS = [BK_ALONE, BK_READER, BK_VIEW, BK_CYCLE, BK_KEPT_READER,
                BK_KEPT_VIEW, BK_KEPT_CYCLE, BK_QEMU]
BACKUP_KEPT = (BK_KEPT_READER, BK_KEPT_VIEW, BK_KEPT_CYCLE)  # in a file
BACKUP_VIEWS = (BK_VIEW, BK_KEPT_VIEW)
BACKUP_CYCLES = (BK_CYCLE, BK_KEPT_CYCLE)
BACKUP_JOBS = 4
SYNCED_WRITES = [  # name, fio rw, bs
    ("4K sequential write + flush", "write", "4k"),
    ("64K sequential write + flush", "write", "64k"),
    ("4K random write + flush", "randwrite", "4k"),
    ("64K random write + flush", "randwrite", "64k"),
]


def remove_settled(path):
    """Removes the file at path, if there is one, and waits until the
    filesystem has finished with it and with everything written before,
    not timed.  The dirty pages a run leaves are written back, and the
    extents of the files it removed discarded (at the journal's next
    commit, docs/performance.md), in the time of whatever
    runs next: without the sync, the peer after a big one pays for it
    or the unlink does on a filesystem without a
    journal."""
    if os.path.exists(path):
        os.unlink(path)
    os.sync()


def reap(p, timeout):
    """Waits for the Popen p to exit, killing its process group after
    timeout seconds; returns its rusage."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pid, status, rusage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.01)
    else:
        os.killpg(p.pid, signal.SIGKILL)
        _, status, rusage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return rusage


class Bench:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.tmp = os.path.join(self.work, "tmp")
        self.env = dict(os.environ, TMPDIR=self.tmp,
                        PATH="/usr/bin:/usr/sbin:/bin:/sbin")
        self.procs = []
        self.rusage = {}
        self.log = open(os.path.join(self.work, "bench.log"), "w")

    # ---- servers -------------------------------------------------------

    def sock(self, name):
        return os.path.join(self.work, name + ".sock")

    def start(self, argv, sock):
        """Starts a server that listens on the Unix socket sock."""
        if os.path.exists(sock):
            os.unlink(sock)
        print("$", " ".join(argv), file=self.log, flush=True)
        p = subprocess.Popen(argv, env=self.env, stdout=self.log,
                             stderr=self.log, start_new_session=True)
        self.procs.append(p)
        deadline = time.time() + 30
        while time.time() < deadline:
            if p.poll() is not None:
                sys.exit("server failed to start: %s (see %s)" %
                         (" ".join(argv), self.log.name))
            if os.path.exists(sock):     # both servers listen before
                return p                  # they create the socket
            time.sleep(0.02)
        sys.exit("server did not start: %s" % " ".join(argv))

    def stop_all(self):
        """Stops every server, newest first.  The rusage of each one that
        this stops (its CPU time and context switches, from wait4) is
        kept in self.rusage under its pid."""
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                self.rusage[p.pid] = reap(p, 20)
        self.procs = []
        shutil.rmtree(self.tmp, ignore_errors=True)
        os.makedirs(self.tmp)

    def nbdkit(self, name, filters, plugin, params, wrapper=()):
        """nbdkit with filters (outermost first) serving plugin, run by
        the command wrapper if given (valgrind, strace)."""
        argv = list(wrapper) + ["nbdkit", "-f", "-U", self.sock(name)]
        for f in filters:
            argv.append("--filter=" + f)
        return self.start(argv + plugin + params, self.sock(name))

    def serve(self, peer, plugin, slow=False, block=None):
        """Serves plugin through peer; returns (uri, server process)."""
        delay = (["delay"], ["delay-read=" + SLOW_READ]) if slow else ([], [])
        bs = ["cow-block-size=" + block] if block else []
        ours = self.args.filter
        if peer in (NONE, NONE_AGAIN):
            p = self.nbdkit("srv", delay[0], plugin, delay[1])
        elif peer == FILE_NONE:
            disk = os.path.join(self.tmp, "ceiling.img")
            with open(disk, "w") as f:
                f.truncate(DISK_BYTES)
            p = self.nbdkit("srv", delay[0], ["file", disk], delay[1])
        elif peer == DISTRO:
            p = self.nbdkit("srv", [self.args.distro_filter] + delay[0],
                            plugin, delay[1] + bs)
        elif peer in (OURS, KEPT):
            kept = (["cow-file=" + os.path.join(self.tmp, "kept.cow")]
                    if peer == KEPT else [])
            p = self.nbdkit("srv", [ours] + delay[0], plugin,
                            delay[1] + bs + kept)
        elif peer == SERIAL:
            p = self.nbdkit("srv", ["noparallel", ours] + delay[0], plugin,
                            delay[1] + bs + ["serialize=all-requests"])
        else:
            p = self.qemu_overlay(plugin, delay)
        return "nbd+unix:///?socket=" + self.sock("srv"), p

    def qemu_overlay(self, plugin, delay, options=""):
        """qemu-nbd serving a qcow2 overlay (64K clusters, and options)
        whose backing file is the same base, served by nbdkit."""
        self.nbdkit("base", delay[0], plugin, delay[1])
        qcow2 = os.path.join(self.tmp, "overlay.qcow2")
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2",
                        "-o", "cluster_size=65536" + options,
                        "-b", "nbd+unix:///?socket=" + self.sock("base"),
                        "-F", "raw", qcow2], check=True, env=self.env,
                       stdout=self.log, stderr=self.log)
        return self.start(["qemu-nbd", "-t", "--shared=64", "-f", "qcow2",
                           "--cache=writeback", "-k", self.sock("srv"),
                           qcow2], self.sock("srv"))

    def overlay_bytes(self, peer, p):
        """Disk space the peer's overlay takes now."""
        if peer == QEMU:
            return os.stat(os.path.join(self.tmp, "overlay.qcow2")).st_blocks * 512
        total = 0
        fds = "/proc/%d/fd" % p.pid
        for fd in os.listdir(fds):
            try:
                if os.readlink(os.path.join(fds, fd)).startswith(self.tmp):
                    total += os.stat(os.path.join(fds, fd)).st_blocks * 512
            except OSError:
                pass
        return total

    def run(self, argv, env=None):
        """Runs argv to its end, in env (the suite's own by default);
        its seconds."""
        print("$", " ".join(argv), file=self.log, flush=True)
        t = time.monotonic()
        subprocess.run(argv, check=True, env=env or self.env,
                       stdout=self.log, stderr=self.log)
        return time.monotonic() - t

    # ---- fio -----------------------------------------------------------

    def fio(self, uri, rw, bs, jobs, requests=None, runtime=None,
            synced=False, iodepth=IODEPTH):
        """fio for runtime seconds (the suite's by default), or for a
        number of requests in all (fewer where a sequential job reaches
        its stretch's end).  synced: each job one request at a time,
        every write followed by a flush (fio's fsync=1), as dd with
        fsync or a database's log does.  Its figures: IOPS, requests,
        and the mean, 99th and 99.9th percentile and worst completion
        latency in microseconds."""
        length = (["--number_ios=%d" % (requests // jobs)] if requests else
                  ["--time_based",
                   "--runtime=%d" % (runtime or self.args.runtime)])
        depth = ["--iodepth=1", "--fsync=1"] if synced else [
            "--iodepth=%d" % iodepth]
        argv = ["fio", "--name=bench", "--ioengine=nbd", "--uri=" + uri,
                "--rw=" + rw, "--bs=" + bs,
                "--numjobs=%d" % jobs] + depth + length + [
                "--group_reporting", "--randrepeat=1", "--output-format=json"]
        if rw == "write":           # each job its own stretch of the disk
            argv += ["--size=%d" % (DISK_BYTES // jobs),
                     "--offset_increment=%d" % (DISK_BYTES // jobs)]
        print("$", " ".join(argv), file=self.log, flush=True)
        out = subprocess.run(argv, check=True, env=self.env, text=True,
                             stdout=subprocess.PIPE, stderr=self.log).stdout
        # The nbd engine prints to stdout before the JSON.
        job = json.loads(out[out.index("\n{") + 1:])["jobs"][0]
        d = job["write" if "write" in rw else "read"]
        return {"iops": d["iops"], "requests": d["total_ios"],
                "mean_us": d["clat_ns"]["mean"] / 1000,
                "p99_us": d["clat_ns"]["percentile"]["99.000000"] / 1000,
                "p999_us": d["clat_ns"]["percentile"]["99.900000"] / 1000,
                "max_us": d["clat_ns"]["max"] / 1000}

    def fio_matrix(self, results):
        """Every workload x jobs x peer, for each scenario."""
        scenarios, workloads = SCENARIOS, WORKLOADS
        if self.args.quick:         # one cell a peer runs the machinery
            scenarios, workloads = scenarios[:1], workloads[:1]
        jobs = [8] if self.args.quick else JOBS
        rounds = 1 if self.args.quick else 2
        for scen, base, slow, block, peers in scenarios:
            for wname, rw, bs in workloads:
                for j in jobs:
                    best = {}
                    # Best of the rounds, each in another peer order:
                    # what drifts on this machine only ever slows a run
                    # down (benchmarks/README.md).
                    for rnd in range(rounds):
                        k = rnd % len(peers)
                        for peer in peers[k:] + peers[:k]:
                            uri, _ = self.serve(peer, base, slow, block)
                            r = self.fio(uri, rw, bs, j)
                            self.stop_all()
                            if peer not in best or r["iops"] > best[peer]["iops"]:
                                best[peer] = r
                    for peer in peers:
                        results.append(dict(best[peer], scenario=scen,
                                            workload=wname, jobs=j, peer=peer,
                                            rounds=rounds))
                        progress("%s | %s | %d jobs | %s: %.0f IOPS" %
                                 (scen, wname, j, peer, best[peer]["iops"]))

    # ---- target runs ---------------------------------------------------

    def target_runs(self, results):
        """The fio cells the targets compare, again in TARGET_ROUNDS
        rounds, each round every cell's peers back to back in a rotated
        order.  One figure moves by 20-30% between runs on this machine
        (benchmarks/README.md), so a target is judged on the median of
        the per-round ratios, not on one best-of-2 figure of the tables."""
        rounds = 1 if self.args.quick else TARGET_ROUNDS
        for rnd in range(rounds):
            for scen, (wname, rw, bs), jobs, peers in target_cells(
                    self.args.quick):
                _, base, slow, block, _ = next(
                    s for s in SCENARIOS + [SLOW_DATA64] if s[0] == scen)
                k = rnd % len(peers)
                for peer in peers[k:] + peers[:k]:
                    uri, _ = self.serve(peer, base, slow, block)
                    r = self.fio(uri, rw, bs, jobs)
                    self.stop_all()
                    results.append({"scenario": scen, "workload": wname,
                                    "jobs": jobs, "peer": peer,
                                    "round": rnd, "iops": r["iops"]})
            progress("target runs: round %d of %d done" % (rnd + 1, rounds))

    # ---- pipeline ------------------------------------------------------

    def http_source(self, image):
        """lighttpd on 127.0.0.1 serving image; returns its URL."""
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        conf = os.path.join(self.work, "lighttpd.conf")
        with open(conf, "w") as f:
            f.write('server.document-root = "%s"\n' % os.path.dirname(image))
            f.write('server.bind = "127.0.0.1"\nserver.port = %d\n' % port)
            f.write('server.pid-file = "%s/lighttpd.pid"\n' % self.work)
        self.http = subprocess.Popen(["lighttpd", "-D", "-f", conf],
                                     stdout=self.log, stderr=self.log)
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port)).close()
                break
            except OSError:
                time.sleep(0.05)
        return "http://127.0.0.1:%d/%s" % (port, os.path.basename(image))

    def pipeline(self, results):
        """Source -> guest-like writes through the overlay -> copy out."""
        size = "256M" if self.args.quick else "4G"
        sparse = ["sparse-random", size, "seed=42"]
        image = os.path.join(self.work, "source", "disk.img")
        os.makedirs(os.path.dirname(image), exist_ok=True)
        self.nbdkit("src", [], sparse, [])
        self.run(["nbdcopy", "nbd+unix:///?socket=" + self.sock("src"), image])
        self.stop_all()
        url = self.http_source(image)
        out = os.path.join(self.work, "out.img")
        # The last two have latency on every base read (nbdkit's delay
        # filter), as a remote source has.
        sources = [("sparse-random " + size, sparse, False),
                   ("the same over HTTP (curl plugin)", ["curl", url], False),
                   ("sparse-random %s, 1 ms per read" % size, sparse, True),
                   ("the same over HTTP, 1 ms more per read", ["curl", url],
                    True)]
        rounds = 1 if self.args.quick else PIPELINE_ROUNDS
        if self.args.quick:         # HTTP and the delay each once
            sources = sources[:3]
        try:
            for sname, plugin, slow in sources:
                times = {peer: [] for peer in PIPELINE_PEERS}
                # Every round in another order: the first run after a
                # change of source pays for cold caches.
                for rnd in range(rounds):
                    order = PIPELINE_PEERS[rnd:] + PIPELINE_PEERS[:rnd]
                    for peer in order:
                        times[peer].append(self.pipeline_one(peer, plugin, slow,
                                                             out))
                        progress("pipeline %s | %s: %.2f + %.2f s" %
                                 ((sname, peer) + times[peer][-1]))
                for peer in PIPELINE_PEERS:
                    # The round with the median total, and every round
                    # in round order, which the targets pair peer by peer.
                    w, c = sorted(times[peer], key=sum)[len(times[peer]) // 2]
                    results.append({"source": sname, "peer": peer,
                                    "slow": slow, "write_s": w, "copy_s": c,
                                    "rounds": len(times[peer]),
                                    "all_s": times[peer], "settled": True})
        finally:
            self.http.terminate()
            self.http.wait()
            if os.path.exists(out):
                os.unlink(out)

    def burst(self, uri):
        """Guest-like random writes through the export at uri."""
        return self.run(["fio", "--name=guest", "--ioengine=nbd",
                         "--uri=" + uri, "--rw=randwrite",
                         "--bssplit=4k/50:16k/20:64k/20:1m/10",
                         "--numjobs=4", "--iodepth=16", "--randrepeat=1",
                         "--io_size=%s" % ("32m" if self.args.quick
                                           else "128m")])

    def copy_out(self, uri, out, env=None):
        if os.path.exists(out):
            os.unlink(out)
        return self.run(["nbdcopy", "--connections=4", uri, out], env)

    def pipeline_one(self, peer, plugin, slow, out):
        uri, _ = self.serve(peer, plugin, slow)
        w = self.burst(uri)
        if peer == QEMU:
            if os.path.exists(out):
                os.unlink(out)
            self.procs[-1].terminate()          # qemu-nbd holds the qcow2
            self.procs[-1].wait()
            c = self.run(["qemu-img", "convert", "-W", "-m", "16", "-f",
                          "qcow2", "-O", "raw",
                          os.path.join(self.tmp, "overlay.qcow2"), out])
        else:
            c = self.copy_out(uri, out)
        self.stop_all()
        remove_settled(out)
        return w, c

    # ---- zeroes --------------------------------------------------------

    def zeroes_one(self, peer, data, empty):
        """Both images into a fresh export of peer: times and overlays."""
        row = {"peer": peer}
        for what, image in (("data", data), ("zero", empty)):
            plugin = MEMORY_BASE if peer == NONE else DATA_BASE
            uri, p = self.serve(peer, plugin)
            row[what + "_s"] = self.run(["nbdcopy", "--connections=4",
                                         image, uri])
            if peer != NONE:
                row[what + "_overlay"] = self.overlay_bytes(peer, p)
            self.stop_all()
        return row

    def zeroes(self, results):
        """Copies a 1 GiB image of data (256 MiB in a quick run), and one
        as large that is all zeros but for its first 4 MiB, into the
        export over a non-zero base."""
        data = os.path.join(self.work, "data.img")
        empty = os.path.join(self.work, "empty.img")
        mib = 256 if self.args.quick else 1024
        self.run(["dd", "if=/dev/urandom", "of=" + data, "bs=1M",
                  "count=%d" % mib, "status=none"])
        self.run(["truncate", "-s", "%dM" % mib, empty])
        self.run(["dd", "if=" + data, "of=" + empty, "bs=1M", "count=4",
                  "conv=notrunc", "status=none"])
        rounds = 1 if self.args.quick else 3
        rows = {peer: [] for peer in ZEROES_PEERS}
        # Rotated like the pipeline: the data time swings with how much
        # fresh memory the run before left behind.
        for rnd in range(rounds):
            for peer in ZEROES_PEERS[rnd:] + ZEROES_PEERS[:rnd]:
                rows[peer].append(self.zeroes_one(peer, data, empty))
                progress("zeroes | %s: data %.2f s, zeros %.2f s" %
                         (peer, rows[peer][-1]["data_s"],
                          rows[peer][-1]["zero_s"]))
        for peer in ZEROES_PEERS:
            results.append(median_zeroes_row(rows[peer]))
        os.unlink(data)
        os.unlink(empty)


# The copy-out through plugin handles that are costly: each open takes
# a second, each takes one request at a time (nbdkit's noparallel
# filter, serialize=requests) and each read 2 ms more (its delay
# filter).  Rows: the filter as nbdkit's does it (a handle per client
# connection), sharing 1, 2 and 4 handles (cow-base-handles), and
# virt-v2v's way today, multi-conn disabled above the filter so that
# the copy uses one connection.
HANDLES_ROWS = [  # name, cow-base-handles, multi-conn disabled
    ("a handle per connection", None, False),
    ("shared, 1 handle", 1, False),
    ("shared, pool of 2", 2, False),
    ("shared, pool of 4", 4, False),
    ("multi-conn disabled", None, True),
]
HANDLE_OPEN = "1"
HANDLE_READ = "2ms"


class SharedHandles:
    """Over costly plugin handles, nbdcopy --connections=4 --threads=4
    writes the first half of a disk of data through the filter (a
    guest's changes: the copy out reads them from the overlay, the rest
    from the plugin) and then copies the disk out: the seconds of each
    and the plugin's opens (cow-stats) for each row of HANDLES_ROWS."""

    def __init__(self, bench):
        self.b = bench
        self.disk = os.path.join(bench.work, "handles.img")
        self.out = os.path.join(bench.work, "handles-out.img")
        self.half = os.path.join(bench.work, "handles-half.img")
        self.stats = os.path.join(bench.work, "handles-stats.json")

    def one(self, handles, no_multi_conn):
        b = self.b
        filters = (["multi-conn"] if no_multi_conn else []) + \
            [b.args.filter, "noparallel", "delay"]
        params = ["serialize=requests", "delay-open=" + HANDLE_OPEN,
                  "delay-read=" + HANDLE_READ, "cow-stats=" + self.stats]
        if handles:
            params.append("cow-base-handles=%d" % handles)
        if no_multi_conn:
            params.append("multi-conn-mode=disable")
        b.nbdkit("srv", filters, ["file", self.disk], params)
        uri = "nbd+unix:///?socket=" + b.sock("srv")
        if os.path.exists(self.out):
            os.unlink(self.out)
        writes = b.run(["nbdcopy", "--connections=4", "--threads=4",
                        self.half, uri])
        seconds = b.run(["nbdcopy", "--connections=4", "--threads=4", uri,
                         self.out])
        b.stop_all()                     # the last report at exit
        with open(self.stats) as f:
            opens = json.load(f)["exports"][0]["plugin_opens"]
        remove_settled(self.out)
        return writes, seconds, opens

    def run(self, results):
        mib = 64 if self.b.args.quick else 256
        for path, n in ((self.disk, mib), (self.half, mib // 2)):
            self.b.run(["dd", "if=/dev/urandom", "of=" + path, "bs=1M",
                        "count=%d" % n, "status=none"])
        rounds = 1 if self.b.args.quick else 3
        rows = {name: [] for name, _, _ in HANDLES_ROWS}
        for rnd in range(rounds):
            k = rnd % len(HANDLES_ROWS)
            for name, handles, no_mc in HANDLES_ROWS[k:] + HANDLES_ROWS[:k]:
                rows[name].append(self.one(handles, no_mc))
                progress("shared handles | %s: writes %.2f s, copy out "
                         "%.2f s, %d opens" % ((name,) + rows[name][-1]))
        for name, _, _ in HANDLES_ROWS:
            times = [t for _, t, _ in rows[name]]
            results.append({"row": name, "rounds": rounds, "mib": mib,
                            "writes_s": statistics.median(
                                w for w, _, _ in rows[name]),
                            "seconds": statistics.median(times),
                            "fastest": min(times), "slowest": max(times),
                            "opens": max(o for _, _, o in rows[name])})
        os.unlink(self.disk)
        os.unlink(self.half)


class Tools:
    """nbdcow commit and export of a kept overlay holding scattered
    changes, against what a qcow2 user runs for the same: qemu-img
    commit of a qcow2 overlay holding the same changes, and the recipe
    of the README before nbdcow (nbdkit serving the live view, qemu-img
    create -b it, qemu-img rebase onto the base)."""

    def __init__(self, bench):
        self.b = bench
        quick = bench.args.quick
        self.size = (256 << 20) if quick else (4 << 30)
        self.changes = (128 << 20) if quick else (2 << 30)
        self.dir = os.path.join(bench.work, "tools")
        self.base = os.path.join(self.dir, "base.img")
        self.cow = os.path.join(self.dir, "changes.cow")
        self.qcow2 = os.path.join(self.dir, "changes.qcow2")

    def path(self, name):
        return os.path.join(self.dir, name)

    def scatter(self, uri):
        """The same scattered 64K writes, self.changes in all, each
        block at most once (fio's random map), through uri."""
        self.b.run(["fio", "--name=scatter", "--ioengine=nbd", "--uri=" + uri,
                    "--rw=randwrite", "--bs=64k", "--iodepth=16",
                    "--size=%d" % self.size, "--io_size=%d" % self.changes,
                    "--randrepeat=1", "--randseed=7"])

    def prepare(self):
        """A base of data, and the two overlays of the same changes."""
        b = self.b
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        b.nbdkit("src", [], ["random", str(self.size), "seed=3"], [])
        b.run(["nbdcopy", "nbd+unix:///?socket=" + b.sock("src"), self.base])
        b.nbdkit("srv", [b.args.filter], ["file", self.base],
                 ["cow-file=" + self.cow])
        self.scatter("nbd+unix:///?socket=" + b.sock("srv"))
        b.stop_all()
        b.run(["qemu-img", "create", "-q", "-f", "qcow2", "-o",
               "cluster_size=65536", "-b", self.base, "-F", "raw", self.qcow2])
        b.start(["qemu-nbd", "-t", "--shared=8", "-f", "qcow2",
                 "--cache=writeback", "-k", b.sock("srv"), self.qcow2],
                b.sock("srv"))
        self.scatter("nbd+unix:///?socket=" + b.sock("srv"))
        b.stop_all()

    def fresh_copies(self, overlay):
        """A copy of the base to commit into and one of overlay, not timed."""
        target, work = self.path("target.img"), self.path("work-" +
                                                         os.path.basename(overlay))
        self.b.run(["cp", "--sparse=always", self.base, target])
        self.b.run(["cp", "--sparse=always", overlay, work])
        os.sync()
        return target, work

    def commit_ours(self, empty):
        target, work = self.fresh_copies(self.cow)
        return self.b.run([self.b.args.nbdcow, "commit"] +
                          (["--empty"] if empty else []) + [work, target])

    def commit_qemu(self, empty):
        target, work = self.fresh_copies(self.qcow2)
        self.b.run(["qemu-img", "rebase", "-u", "-b", target, "-F", "raw",
                    work])
        return self.b.run(["qemu-img", "commit", "-q"] +
                          ([] if empty else ["-d"]) + [work])

    def no_out(self):
        """Removes the last export's file, not timed."""
        out = self.path("out.qcow2")
        remove_settled(out)
        return out

    def export_ours(self):
        out = self.no_out()
        return self.b.run([self.b.args.nbdcow, "export", self.cow,
                           "--base=" + self.base, out])

    def export_recipe(self):
        b, out = self.b, self.no_out()
        t = time.monotonic()
        b.nbdkit("srv", [b.args.filter], ["file", self.base],
                 ["cow-file=" + self.cow])
        b.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b",
               "nbd+unix:///?socket=" + b.sock("srv"), "-F", "raw", out])
        b.run(["qemu-img", "rebase", "-b", self.base, "-F", "raw", out])
        b.stop_all()
        return time.monotonic() - t

    def run(self, results):
        self.prepare()
        rounds = 1 if self.b.args.quick else 3
        jobs = [("commit", OURS_COMMIT, lambda: self.commit_ours(True)),
                ("commit", QEMU_COMMIT, lambda: self.commit_qemu(True)),
                ("commit", OURS_KEEP, lambda: self.commit_ours(False)),
                ("commit", QEMU_KEEP, lambda: self.commit_qemu(False)),
                ("export", OURS_EXPORT, self.export_ours),
                ("export", RECIPE_EXPORT, self.export_recipe)]
        times = {peer: [] for _, peer, _ in jobs}
        for rnd in range(rounds):
            for what, peer, fn in jobs[rnd:] + jobs[:rnd]:
                times[peer].append(fn())
                # Nothing one job left in the page cache is written
                # back in the time of the next: it would be timed
                # flushing what it did not write.
                os.sync()
                progress("%s | %s: %.2f s" % (what, peer, times[peer][-1]))
        for what, peer, _ in jobs:
            results.append({"what": what, "peer": peer,
                            "seconds": statistics.median(times[peer]),
                            "all_s": times[peer],
                            "changes": self.changes, "size": self.size})
        shutil.rmtree(self.dir, ignore_errors=True)


class ChangesView:
    """A qcow2 diff of the base saved from a running server: through
    the export's changes view (qemu-img convert -B of NAME+, issue 64)
    against the recipe it replaces (qemu-img create -b the live export,
    qemu-img rebase onto the base).  The changes are runs of 1 MiB
    spread over the disk, kept in a cow-file so that every job starts a
    fresh server over the same overlay; cow-stats counts what the
    filter read for each job."""

    def __init__(self, bench):
        self.b = bench
        quick = bench.args.quick
        self.size = (256 << 20) if quick else (4 << 30)
        self.changes = (16 << 20) if quick else (64 << 20)
        self.dir = os.path.join(bench.work, "changes")
        self.base = os.path.join(self.dir, "base.img")
        self.cow = os.path.join(self.dir, "changes.cow")
        self.stats = os.path.join(self.dir, "stats.json")
        self.out = os.path.join(self.dir, "diff.qcow2")

    def serve(self):
        self.b.nbdkit("srv", [self.b.args.filter], ["file", self.base],
                      ["cow-file=" + self.cow, "cow-changes-separator=+",
                       "cow-stats=" + self.stats])
        return "nbd+unix:///%s?socket=" + self.b.sock("srv")

    def prepare(self):
        """A base of data, and the runs written into the kept overlay."""
        b = self.b
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        b.nbdkit("src", [], ["random", str(self.size), "seed=5"], [])
        b.run(["nbdcopy", "nbd+unix:///?socket=" + b.sock("src"), self.base])
        b.stop_all()
        uri = self.serve()
        runs = self.changes >> 20
        stride = self.size // runs
        b.run(["qemu-io", "-f", "raw"] +
              [a for i in range(runs) for a in
               ("-c", "write -P %d %d 1M" % (i % 250 + 1, i * stride))] +
              [uri % ""])
        b.stop_all()

    def via_view(self, uri):
        return self.b.run(["qemu-img", "convert", "-f", "raw", "-O", "qcow2",
                           "-B", self.base, "-F", "raw", uri % "+",
                           self.out])

    def via_recipe(self, uri):
        return (self.b.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b",
                            uri % "", "-F", "raw", self.out]) +
                self.b.run(["qemu-img", "rebase", "-b", self.base, "-F",
                            "raw", self.out]))

    def one(self, job):
        """Seconds of job against a fresh server, and the bytes the
        filter read for it: in all, and from the base."""
        remove_settled(self.out)
        uri = self.serve()
        seconds = job(uri)
        self.b.stop_all()                 # the statistics' final report
        export = json.load(open(self.stats))["exports"][0]
        return (seconds, export["requests"]["read"]["bytes"],
                export["base_reads"]["bytes"])

    def run(self, results):
        self.prepare()
        rounds = 1 if self.b.args.quick else 3
        jobs = [(VIEW_DIFF, self.via_view), (RECIPE_DIFF, self.via_recipe)]
        runs = {peer: [] for peer, _ in jobs}
        for rnd in range(rounds):
            for peer, job in jobs[rnd % 2:] + jobs[:rnd % 2]:
                runs[peer].append(self.one(job))
                os.sync()
                progress("changes diff | %s: %.2f s, read %d bytes, %d of "
                         "the base" % ((peer,) + runs[peer][-1]))
        for peer, _ in jobs:
            results.append({"peer": peer,
                            "seconds": statistics.median(
                                r[0] for r in runs[peer]),
                            "all_s": [r[0] for r in runs[peer]],
                            "read_bytes": max(r[1] for r in runs[peer]),
                            "base_bytes": max(r[2] for r in runs[peer]),
                            "changes": self.changes, "size": self.size})
        shutil.rmtree(self.dir, ignore_errors=True)


class Fill:
    """A virt-v2v-like pipeline over a slow source: a file of data and
    holes behind nbdkit's delay filter (SOURCE_LATENCY per read) and
    rate filter (SOURCE_RATE).  A client modifies the disk in place
    with a few hundred scattered reads (each timed) and writes, with
    the conversion's work between them, then nbdcopy copies it out over
    4 connections.  Peers: our filter with
    cow-fill, with cow-on-read alone and with neither, and the
    yardstick: one nbdcopy of the source itself.  cow-stats gives the
    bytes each peer read from the source."""

    OPS = 300

    def __init__(self, bench):
        self.b = bench
        self.size = (64 << 20) if bench.args.quick else (1 << 30)
        # The work of the conversion between two requests (virt-v2v
        # thinks for minutes): with it the modify takes about half a
        # pass over the source.
        self.think_s = 0.002 if bench.args.quick else 0.02
        self.dir = os.path.join(bench.work, "fill")
        self.base = os.path.join(self.dir, "base.img")
        self.stats = os.path.join(self.dir, "stats.json")
        self.out = os.path.join(self.dir, "out.img")
        self.data = 0

    def prepare(self):
        """The source: in each 16 MiB, 10 MiB of data, then a hole."""
        shutil.rmtree(self.dir, ignore_errors=True)
        os.makedirs(self.dir)
        chunk = 16 << 20
        with open(self.base, "wb") as f:
            f.truncate(self.size)
            for at in range(0, self.size, chunk):
                f.seek(at)
                f.write(os.urandom(10 << 20))
                self.data += 10 << 20

    def serve(self, peer):
        source = ["file", self.base]
        slow = ["rate", "delay"]
        params = ["rate=" + SOURCE_RATE, "delay-read=" + SOURCE_LATENCY]
        if peer == ONE_PASS:
            self.b.nbdkit("srv", slow, source, params)
        else:
            mode = {FILL_ON: ["cow-fill=true"], FILL_PACED: FILL_PACE,
                    COR_ALONE: ["cow-on-read=true"], NEITHER: []}[peer]
            self.b.nbdkit("srv", [self.b.args.filter] + slow, source,
                          params + mode + ["cow-stats=" + self.stats])
        return "nbd+unix:///?socket=" + self.b.sock("srv")

    def modify(self, uri):
        """OPS scattered requests, two reads of 64 KiB for each write of
        4 KiB, at the same offsets for every peer, think_s apart; the
        reads' seconds."""
        import nbd
        import random
        rng = random.Random(65)
        h = nbd.NBD()
        h.connect_uri(uri)
        latencies = []
        for i in range(self.OPS):
            time.sleep(self.think_s)
            offset = rng.randrange(self.size - 65536)
            if i % 3 == 2:
                h.pwrite(b"m" * 4096, offset)
                continue
            t = time.perf_counter()
            h.pread(65536, offset)
            latencies.append(time.perf_counter() - t)
        h.flush()
        h.shutdown()
        return latencies

    def one(self, peer):
        remove_settled(self.out)
        uri = self.serve(peer)
        t = time.monotonic()
        latencies = [] if peer == ONE_PASS else self.modify(uri)
        modify_s = time.monotonic() - t
        copy_s = self.b.run(["nbdcopy", "--connections=4", uri, self.out])
        self.b.stop_all()                 # the statistics' final report
        source = self.data if peer == ONE_PASS else \
            json.load(open(self.stats))["exports"][0]["base_reads"]["bytes"]
        latencies.sort()
        pick = (lambda q: latencies[min(len(latencies) - 1,
                                        int(q * len(latencies)))] * 1000
                if latencies else 0)
        return {"peer": peer, "modify_s": modify_s, "copy_s": copy_s,
                "seconds": modify_s + copy_s, "source_bytes": source,
                "data_bytes": self.data, "size": self.size,
                "latency": SOURCE_LATENCY, "rate": SOURCE_RATE,
                "ops": self.OPS, "think_ms": self.think_s * 1000,
                "paced": " ".join(FILL_PACE),
                "read_p50_ms": pick(0.5), "read_p99_ms": pick(0.99)}

    def run(self, results):
        self.prepare()
        for peer in [ONE_PASS, NEITHER, COR_ALONE, FILL_ON, FILL_PACED]:
            results.append(self.one(peer))
            os.sync()
            r = results[-1]
            progress("fill | %s: %.2f s, %d bytes of the source, reads "
                     "p50 %.2f ms p99 %.2f ms" %
                     (peer, r["seconds"], r["source_bytes"],
                      r["read_p50_ms"], r["read_p99_ms"]))
        shutil.rmtree(self.dir, ignore_errors=True)


def rotated_iops(b, peers, rounds, label, measure):
    """Each peer's IOPS in every round, the peers in an order rotated
    by one each round: measure(peer) serves it and returns fio's
    figures.  After each, the servers stop and their files are written
    back, not timed."""
    iops = {peer: [] for peer in peers}
    for rnd in range(rounds):
        k = rnd % len(peers)
        for peer in peers[k:] + peers[:k]:
            r = measure(peer)
            b.stop_all()
            os.sync()
            iops[peer].append(r["iops"])
            progress("%s | %s: %.0f IOPS" % (label, peer, r["iops"]))
    return iops


class RotatedCell:
    """A cell of the suite whose peers run in rotated rounds: rounds of
    runtime seconds each over its writes, one of each in a quick
    run."""

    def __init__(self, bench, rounds, runtime, writes):
        quick = bench.args.quick
        self.b = bench
        self.rounds = 1 if quick else rounds
        self.runtime = 1 if quick else runtime
        self.writes = writes[:1] if quick else writes


class FirstWrites(RotatedCell):
    """Small random writes into blocks not yet in the overlay, over a
    base of data behind nbdkit's delay filter (SLOW_READ per read),
    so large that nearly every write is its block's first: a
    conversion tool editing a guest in place over a slow source.  Ours
    at its defaults against ours with 4K blocks (which read nothing for
    a 4K write) and qcow2 with and without subclusters."""

    def __init__(self, bench):
        super().__init__(bench, 3, 6, FIRST_WRITES)

    def serve(self, peer):
        b = self.b
        delay = (["delay"], ["delay-read=" + SLOW_READ])
        if peer in (FW_QEMU, FW_QEMU_SUB):
            b.qemu_overlay(FIRST_WRITES_BASE, delay,
                           ",extended_l2=on" if peer == FW_QEMU_SUB else "")
        else:
            bs = ["cow-block-size=4K"] if peer == FW_OURS_4K else []
            b.nbdkit("srv", [b.args.filter] + delay[0], FIRST_WRITES_BASE,
                     delay[1] + bs)
        return "nbd+unix:///?socket=" + b.sock("srv")

    def run(self, results):
        peers = FIRST_WRITES_PEERS
        for wname, bs in self.writes:
            iops = rotated_iops(
                self.b, peers, self.rounds, "first writes | " + wname,
                lambda peer: self.b.fio(self.serve(peer), "randwrite", bs,
                                        FIRST_WRITES_JOBS,
                                        runtime=self.runtime))
            for peer in peers:
                results.append({"workload": wname, "peer": peer,
                                "iops": statistics.median(iops[peer]),
                                "all_iops": iops[peer],
                                "jobs": FIRST_WRITES_JOBS,
                                "runtime": self.runtime})


class SyncedWrites(RotatedCell):
    """Writes each made durable before the next (a flush after every
    write, one job, one request at a time) into a fresh 1G disk: a kept
    overlay against qcow2 over the same base and against nbdkit's file
    plugin writing a file, which pays only the filesystem's syncs."""

    def __init__(self, bench):
        super().__init__(bench, 5, 5, SYNCED_WRITES)

    def serve(self, peer):
        b = self.b
        if peer == SW_QEMU:
            b.qemu_overlay(MEMORY_BASE, ([], []))
            return "nbd+unix:///?socket=" + b.sock("srv")
        uri, _ = b.serve(KEPT if peer == SW_KEPT else FILE_NONE, MEMORY_BASE)
        return uri

    def run(self, results):
        peers = SYNCED_WRITES_PEERS
        for wname, rw, bs in self.writes:
            iops = rotated_iops(
                self.b, peers, self.rounds, "synced writes | " + wname,
                lambda peer: self.b.fio(self.serve(peer), rw, bs, 1,
                                        runtime=self.runtime, synced=True))
            for peer in peers:
                results.append({"workload": wname, "peer": peer,
                                "iops": statistics.median(iops[peer]),
                                "all_iops": iops[peer],
                                "runtime": self.runtime})


class Backups(RotatedCell):
    """A backup of a disk that keeps being written: clients' 4K random
    writes on an export whose overlay holds the whole disk, while
    nbdcopy reads, again and again, a point-in-time view of it; against
    the same writes alone and beside nbdcopy reading the export itself,
    beside whole backup cycles (a view made, read whole, deleted, again
    and again), and against QEMU's fleecing of the same disk
    (qemu-storage-daemon:
    copy-before-write into a qcow2 scratch, snapshot-access over it);
    the overlay throw-away, and kept in a file (cow-file), with and
    without a view.  Also what keeping the view costs: the bytes written
    to keep it (ours: those it made the overlay copy, with either
    store; QEMU's: its scratch file) against the bytes
    overwritten that the overlay held at its instant (ours: those only
    the view keeps), and the time to make a view of a 1 TiB disk with 1
    GiB in its overlay, throw-away and kept, asked of the control
    socket."""

    def __init__(self, bench):
        super().__init__(bench, 3, 5, [("4K random write", "4k")])

    def control(self, *fields):
        s = socket.socket(socket.AF_UNIX)
        s.connect(os.path.join(self.b.work, "cow.ctl"))
        s.sendall(b"".join(f.encode() + b"\0" for f in fields))
        s.shutdown(socket.SHUT_WR)
        answer = b""
        while True:
            got = s.recv(4096)
            if not got:
                break
            answer += got
        s.close()
        if not answer.startswith(b"ok\n"):
            sys.exit("control %s: %s" % (fields, answer))
        return answer.decode()[3:]

    def ours(self, size, kept):
        """Ours over nbdkit null of size, its overlay kept in a new file
        if kept."""
        b = self.b
        ctl = os.path.join(b.work, "cow.ctl")
        params = ["cow-control=" + ctl, "cow-view-separator=@",
                  "cow-stats=" + os.path.join(b.tmp, "stats.json")]
        if kept:
            params.append("cow-file=" + os.path.join(b.tmp, "kept.cow"))
        b.nbdkit("srv", [b.args.filter], ["null", size], params)
        return "nbd+unix:///?socket=" + b.sock("srv")

    def fill(self, uri):
        self.b.run(["nbdcopy", "--", "[", "nbdkit", "pattern", DISK,
                    "]", uri])

    def qemu(self):
        b = self.b
        disk = os.path.join(b.tmp, "disk.raw")
        scratch = os.path.join(b.tmp, "scratch.qcow2")
        self.fill(disk)
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", disk,
                        "-F", "raw", scratch], check=True, env=b.env)
        sock = b.sock("srv")
        p = b.start([
            "qemu-storage-daemon",
            "--blockdev", "driver=file,node-name=disk-file,filename=" + disk,
            "--blockdev", "driver=raw,node-name=disk,file=disk-file",
            "--blockdev",
            "driver=file,node-name=scratch-file,filename=" + scratch,
            "--blockdev", "driver=qcow2,node-name=scratch,file=scratch-file,"
            "backing=disk",
            "--blockdev", "driver=copy-before-write,node-name=cbw,file=disk,"
            "target=scratch",
            "--blockdev", "driver=snapshot-access,node-name=snap,file=cbw",
            "--nbd-server", "addr.type=unix,addr.path=" + sock,
            "--export", "type=nbd,id=w,node-name=cbw,name=disk,writable=on",
            "--export", "type=nbd,id=r,node-name=snap,name=snap"], sock)
        return ("nbd+unix:///disk?socket=" + sock,
                "nbd+unix:///snap?socket=" + sock, p, scratch)

    def measure(self, peer, row):
        """fio on the export while its reader reads: fio's figures, and
        in row the bytes the view kept."""
        b = self.b
        reader = None
        if peer == BK_QEMU:
            uri, read_uri, _, scratch = self.qemu()
        else:
            uri = self.ours(DISK, peer in BACKUP_KEPT)
            self.fill(uri)
            read_uri = uri if peer in (BK_READER, BK_KEPT_READER) else None
            if peer in BACKUP_VIEWS:
                read_uri = "nbd+unix:///" + self.control(
                    "view-create", "", "b").strip() + "?socket=" + \
                    b.sock("srv")
        if read_uri:
            reader = subprocess.Popen(
                ["sh", "-c", 'while nbdcopy "$0" null:; do :; done', read_uri],
                env=b.env, stdout=b.log, stderr=b.log,
                start_new_session=True)
        if peer in BACKUP_CYCLES:
            reader = subprocess.Popen(
                ["sh", "-c", 'while :; do "$0" view create "$1" "" c && '
                 'nbdcopy "nbd+unix:///@c?socket=$2" null: && '
                 '"$0" view delete "$1" "" c; done',
                 b.args.nbdcow, os.path.join(b.work, "cow.ctl"),
                 b.sock("srv")],
                env=b.env, stdout=b.log, stderr=b.log,
                start_new_session=True)
        try:
            r = b.fio(uri, "randwrite", "4k", BACKUP_JOBS,
                      runtime=self.runtime)
        finally:
            if reader:
                os.killpg(reader.pid, signal.SIGTERM)
                reader.wait()
        if peer in BACKUP_VIEWS:
            time.sleep(1.2)         # the statistics, rewritten each second
            with open(os.path.join(b.tmp, "stats.json")) as f:
                export = json.load(f)["exports"][0]
            row.setdefault("kept_bytes", {}).setdefault(peer, []).append(
                export["view"]["kept_bytes"])
            row.setdefault("copied_bytes", {}).setdefault(peer, []).append(
                export["views_copied_bytes"])
        if peer == BK_QEMU:
            row.setdefault("scratch_bytes", []).append(
                os.stat(scratch).st_blocks * 512)
        row.setdefault("written_bytes", {}).setdefault(peer, []).append(
            r["requests"] * 4096)
        for key in ("p999_us", "max_us"):
            row.setdefault(key, {}).setdefault(peer, []).append(r[key])
        return r

    def make_time_ms(self, kept):
        """The medians of making a view of a 1 TiB disk with 1 GiB in its
        overlay (kept in a file if kept), and of deleting it, in ms, over
        9 of each."""
        b = self.b
        uri = self.ours("1T", kept)
        # Flushed, as a guest's disk is now and then: the view's
        # checkpoint flushes a kept file, which then has little to sync.
        b.run(["nbdcopy", "--flush", "--", "[", "nbdkit", "pattern", DISK,
               "]", uri])
        made, deleted = [], []
        for i in range(1 if b.args.quick else 9):
            t = time.monotonic()
            self.control("view-create", "", "t%d" % i)
            made.append((time.monotonic() - t) * 1000)
            t = time.monotonic()
            self.control("view-delete", "", "t%d" % i)
            deleted.append((time.monotonic() - t) * 1000)
        b.stop_all()
        return statistics.median(made), statistics.median(deleted)

    def run(self, results):
        row = {"workload": self.writes[0][0], "jobs": BACKUP_JOBS,
               "runtime": self.runtime}
        row["iops"] = rotated_iops(
            self.b, BACKUP_PEERS, self.rounds, "backups | " + row["workload"],
            lambda peer: self.measure(peer, row))
        for kept, key in [(False, ""), (True, "kept_")]:
            made, deleted = self.make_time_ms(kept)
            row[key + "make_ms"], row[key + "delete_ms"] = made, deleted
            progress("backups | a view of 1 TiB with 1 GiB held%s: made in "
                     "%.2f ms, deleted in %.2f ms" %
                     (" in a kept file" if kept else "", made, deleted))
        results.append(row)


class GiveBack(RotatedCell):
    """A view of a kept overlay that keeps old bytes, deleted while a
    client writes 4K at random (one job, iodepth 8): the deletion's
    time, how long its places took to go back in the background, and
    the client's write completions over the whole run, against the
    same writes beside nbdcopy reading the export (the control) on the
    same overlay holding as much.  The view keeps 512 MiB, then 8 GiB
    (64 MiB in a quick run); fio runs long enough to cover the
    give-back with room to spare."""

    SIZES = [(512 << 20, 8), (8 << 30, 60)]     # bytes kept, fio seconds
    READER, DELETE = ("nbdcopy reading the export",
                      "the view deleted, its places going back")
    # The filesystem's part, no filter: nbdkit's file plugin serves a
    # file while as many bytes of data are punched, 64K at a time as
    # the give-back punches a block, in the same file or in another,
    # or, their control, while nothing is.
    PUNCHED, PUNCHED_ELSEWHERE, UNPUNCHED = (
        "no filter: the file punched beside the writes",
        "no filter: another file punched beside the writes",
        "no filter: nothing punched")
    PEERS = [READER, DELETE, PUNCHED, PUNCHED_ELSEWHERE, UNPUNCHED]
    PUNCH_STEP = 64 << 10

    def __init__(self, bench):
        super().__init__(bench, 3, 0, [("4K random write", "4k")])
        self.sizes = [(64 << 20, 2)] if bench.args.quick else self.SIZES

    def serve(self, size):
        b = self.b
        ctl = os.path.join(b.work, "cow.ctl")
        b.nbdkit("srv", [b.args.filter], ["null", str(size)],
                 ["cow-control=" + ctl, "cow-view-separator=@",
                  "cow-file=" + os.path.join(b.tmp, "kept.cow")])
        return "nbd+unix:///?socket=" + b.sock("srv"), ctl

    def fill(self, uri, size, plugin):
        self.b.run(["nbdcopy", "--flush", "--", "[", "nbdkit", plugin,
                    str(size), "]", uri])

    def control(self, ctl, *args):
        return subprocess.run([self.b.args.nbdcow, "view"] + list(args)
                              + [ctl, ""] + (["v"] if args[0] != "show"
                                             else []),
                              check=True, capture_output=True, text=True,
                              env=self.b.env).stdout

    def deleter(self, ctl, row):
        """Deletes view v a second into fio's run, then waits for its
        places to go back: the times into row."""
        time.sleep(1)
        t = time.monotonic()
        self.control(ctl, "delete")
        row["delete_s"] = time.monotonic() - t
        while "giving-back" in self.control(ctl, "show"):
            time.sleep(0.05)
        row["give_back_s"] = time.monotonic() - t

    def write_data(self, path, offset, size):
        """size bytes of random data written at offset into path, and
        synced, as the view's old bytes are when it is deleted."""
        chunk = os.urandom(1 << 20)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            for at in range(offset, offset + size, len(chunk)):
                os.pwrite(fd, chunk, at)
            os.fsync(fd)
        finally:
            os.close(fd)

    def serve_file(self, peer, size):
        """The file plugin serving size bytes, and the file and offset
        of size bytes of data to punch."""
        b = self.b
        export = os.path.join(b.tmp, "export.img")
        for f in (export, os.path.join(b.tmp, "punched.img")):
            if os.path.exists(f):
                os.unlink(f)
        punched, at = ((export, size) if peer == self.PUNCHED else
                       (os.path.join(b.tmp, "punched.img"), 0))
        with open(export, "w") as f:
            f.truncate(size)
        if peer == self.UNPUNCHED:
            punched = None
        else:
            self.write_data(punched, at, size)
        b.nbdkit("srv", ["truncate"], ["file", export],
                 ["truncate=%d" % size])
        return "nbd+unix:///?socket=" + b.sock("srv"), punched, at

    def puncher(self, path, offset, size, row):
        """Punches [offset, offset+size) of path a step at a time, a
        second into fio's run: the seconds it took into row."""
        libc = ctypes.CDLL(None, use_errno=True)
        libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int,
                                   ctypes.c_int64, ctypes.c_int64]
        keep_size_punch_hole = 0x01 | 0x02
        time.sleep(1)
        fd = os.open(path, os.O_RDWR)
        t = time.monotonic()
        try:
            for at in range(offset, offset + size, self.PUNCH_STEP):
                if libc.fallocate(fd, keep_size_punch_hole, at,
                                  self.PUNCH_STEP) != 0:
                    raise OSError(ctypes.get_errno(), "fallocate", path)
        finally:
            os.close(fd)
        row["give_back_s"] = time.monotonic() - t

    def measure(self, peer, size, runtime, rows):
        if peer in (self.PUNCHED, self.PUNCHED_ELSEWHERE, self.UNPUNCHED):
            return self.measure_punched(peer, size, runtime, rows)
        b = self.b
        uri, ctl = self.serve(size)
        self.fill(uri, size, "pattern")
        row = {}
        if peer == self.DELETE:
            self.control(ctl, "create")
            self.fill(uri, size, "random")
            side = threading.Thread(target=self.deleter, args=(ctl, row))
        else:
            reader = subprocess.Popen(
                ["sh", "-c", 'while nbdcopy "$0" null:; do :; done', uri],
                env=b.env, stdout=b.log, stderr=b.log,
                start_new_session=True)
            side = threading.Thread(target=lambda: None)
        side.start()
        try:
            r = b.fio(uri, "randwrite", "4k", 1, runtime=runtime, iodepth=8)
        finally:
            side.join()
            if peer == self.READER:
                os.killpg(reader.pid, signal.SIGTERM)
                reader.wait()
        row.update(r)
        rows.setdefault(peer, []).append(row)
        return r

    def measure_punched(self, peer, size, runtime, rows):
        uri, punched, at = self.serve_file(peer, size)
        self.fill(uri, size, "pattern")
        row = {}
        side = threading.Thread(
            target=self.puncher if punched else lambda *args: None,
            args=(punched, at, size, row))
        side.start()
        try:
            r = self.b.fio(uri, "randwrite", "4k", 1, runtime=runtime,
                           iodepth=8)
        finally:
            side.join()
        row.update(r)
        rows.setdefault(peer, []).append(row)
        return r

    def run(self, results):
        for size, runtime in self.sizes:
            rows = {}
            rotated_iops(self.b, self.PEERS, self.rounds,
                         "give-back | %d MiB kept" % (size >> 20),
                         lambda peer: self.measure(peer, size, runtime,
                                                   rows))
            results.append({"kept_bytes": size, "runtime": runtime,
                            "rounds": rows})
            progress("give-back | %d MiB kept: worst write %s ms deleting, "
                     "%s ms reading" % (size >> 20, ", ".join(
                         "%.1f" % (x["max_us"] / 1000)
                         for x in rows[self.DELETE]), ", ".join(
                         "%.1f" % (x["max_us"] / 1000)
                         for x in rows[self.READER])))


def median_zeroes_row(rows):
    """The round with the median data / zeros ratio, with the largest
    overlay any round left: a size that only one round shows is still
    a size the filter can leave."""
    row = dict(sorted(rows, key=lambda r: r["data_s"] / r["zero_s"])
               [len(rows) // 2], rounds=len(rows))
    for key in ("data_overlay", "zero_overlay"):
        if key in row:
            row[key] = max(r[key] for r in rows)
    return row


def target_cells(quick):
    """RATIO_CELLS, then for the scaling target every scenario and
    workload with 1 and 8 jobs of the ceiling, ours, ours with cow-file
    and the ceiling again as a control: the four back to back, so that
    the 8-jobs/1-job ratio of each is taken in the same stretch of a
    round as the ceiling's.  A quick run, which judges nothing, takes
    the first scenario's first workload only."""
    cells = list(RATIO_CELLS)
    peers = [NONE, OURS, KEPT, NONE_AGAIN]
    for scen, _, _, _, _ in SCENARIOS[:1] if quick else SCENARIOS:
        for wl in WORKLOADS[:1] if quick else WORKLOADS:
            cells.append((scen, wl, 1, peers))
            cells.append((scen, wl, 8, peers))
    return cells


def progress(msg):
    print(msg, flush=True)


def paired_median(num, den):
    """The median of the rounds' own ratios num / den, two peers'
    figures of the same rounds: a round that the machine slows for both
    cancels out of its ratio."""
    return statistics.median(n / d for n, d in zip(num, den))


def side_parser(rounds, runtime):
    """The options every side tool of the suite has (before_after.py,
    cpu_per_request.py): its scratch directory, rounds and seconds per
    measurement."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--runtime", type=int, default=runtime)
    return ap


def side_bench(ap):
    """The arguments of a side tool's parser, and a Bench that runs
    full-length measurements with them."""
    args = ap.parse_args()
    args.quick = False
    os.makedirs(os.path.join(args.work, "tmp"), exist_ok=True)
    return args, Bench(args)


def machine():
    def out(argv):
        try:
            return subprocess.run(argv, text=True, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT).stdout.strip()
        except OSError:
            return "not found"
    cpu = [l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo")
           if l.startswith("model name")]
    return {
        "cpu": cpu[0] if cpu else platform.processor(),
        "cores": os.cpu_count(),
        "memory": out(["sh", "-c", "free -h | awk '/Mem:/ {print $2}'"]),
        "kernel": platform.release(),
        "os": out(["sh", "-c", ". /etc/os-release; echo $PRETTY_NAME"]),
        "nbdkit": out(["nbdkit", "--version"]),
        "libnbd": out(["nbdcopy", "--version"]).splitlines()[0],
        "qemu": out(["qemu-nbd", "--version"]).splitlines()[0],
        "fio": out(["fio", "--version"]),
        "gcc": out(["gcc", "--version"]).splitlines()[0],
        "commit": out(["git", "-C", os.path.dirname(__file__), "describe",
                       "--always", "--dirty"]),
        "overlay filesystem": out(["findmnt", "-n", "-o", "FSTYPE,OPTIONS",
                                   "-T", os.path.dirname(__file__)]),
        "overlay journal": journal_of(os.path.dirname(__file__)),
        "guest": guest_kind(),
    }


def journal_of(path):
    """Whether the ext4 filesystem holding path has a journal: without
    one, freeing an extent on a `discard` mount waits on the device's
    discard inside the call that frees it (docs/performance.md);
    with one, the journal's commit sends them."""
    fields = command_output(["findmnt", "-n", "-o", "SOURCE,FSTYPE",
                             "-T", path]).split()
    if len(fields) != 2 or fields[1] not in ("ext3", "ext4"):
        return "not ext3/ext4"
    dev = os.path.basename(fields[0])
    try:
        journals = os.listdir("/proc/fs/jbd2")
    except OSError:
        journals = []
    return ("yes (jbd2)" if any(j.startswith(dev + "-") for j in journals)
            else "none (ext4 without a journal)")


def guest_kind():
    """Whether the kernel runs paravirtualized (PVM, where every page
    fault is a trip to the host), under another hypervisor, or on bare
    metal: absolute figures differ by kind (benchmarks/README.md).
    dmesg's log lines tell PVM from KVM; once the kernel's ring buffer
    has wrapped past them, lscpu or the CPU's hypervisor flag still
    tell a virtual machine, but not which kind."""
    kind = guest_kind_in_kernel_log(command_output(["dmesg"]))
    if kind:
        return kind
    unknown = ("dmesg no longer holds the lines that tell a "
               "paravirtualized kernel apart")
    for line in command_output(["lscpu"]).splitlines():
        if line.startswith("Hypervisor vendor:"):
            return ("virtual machine (%s, from lscpu; %s)" %
                    (line.split(":", 1)[1].strip(), unknown))
    with open("/proc/cpuinfo") as f:
        if any(line.startswith("flags") and "hypervisor" in line.split()
               for line in f):
            return ("virtual machine (the CPU's hypervisor flag; %s)" %
                    unknown)
    return "no hypervisor seen (dmesg, lscpu, /proc/cpuinfo)"


def guest_kind_in_kernel_log(log):
    """The guest's kind as the kernel log names it, or None.  The boot
    line "Hypervisor detected: NAME" names any hypervisor; on a PVM
    guest the kvm_pvm module's "this kernel is itself a kvm-pvm guest",
    logged later in the boot, also names PVM and often outlives it."""
    for line in log.splitlines():
        if "Hypervisor detected:" in line:
            name = line.split("Hypervisor detected:", 1)[1].strip()
            return ("paravirtualized (%s)" % name if name == "PVM"
                    else "virtual machine (%s)" % name)
        if "this kernel is itself a kvm-pvm guest" in line:
            return "paravirtualized (PVM, from kvm_pvm's log line)"
    return None


def command_output(argv):
    """What argv prints, or nothing if it cannot run."""
    try:
        return subprocess.run(argv, text=True, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL).stdout
    except OSError:
        return ""


# The cells --only runs alone, by their keys in results.json.
CELLS = {"shared_handles": SharedHandles, "tools": Tools,
         "changes": ChangesView, "fill": Fill, "first_writes": FirstWrites,
         "synced_writes": SyncedWrites, "backups": Backups,
         "give_back": GiveBack}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--filter", required=True)
    ap.add_argument("--distro-filter", required=True)
    ap.add_argument("--nbdcow", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--runtime", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--targets-only", action="store_true")
    ap.add_argument("--tools-only", action="store_true")
    ap.add_argument("--no-tables", action="store_true")
    ap.add_argument("--only", choices=sorted(CELLS))
    args = ap.parse_args()
    os.makedirs(os.path.join(args.work, "tmp"), exist_ok=True)
    os.makedirs(args.out, exist_ok=True)

    b = Bench(args)
    results = {"machine": machine(), "runtime": args.runtime,
               "quick": args.quick, "fio": [], "pipeline": [], "zeroes": [],
               "targets": [], "tools": [], "changes": [],
               "shared_handles": [], "fill": [], "first_writes": [],
               "synced_writes": [], "backups": [], "give_back": []}
    started = time.time()
    try:
        if args.only:
            CELLS[args.only](b).run(results[args.only])
        elif not (args.targets_only or args.tools_only):
            if not args.no_tables:
                b.fio_matrix(results["fio"])
            b.pipeline(results["pipeline"])
            b.zeroes(results["zeroes"])
            SharedHandles(b).run(results["shared_handles"])
        if not args.targets_only and not args.only:
            Tools(b).run(results["tools"])
            ChangesView(b).run(results["changes"])
            Fill(b).run(results["fill"])
        if not args.tools_only and not args.only:
            FirstWrites(b).run(results["first_writes"])
            SyncedWrites(b).run(results["synced_writes"])
            Backups(b).run(results["backups"])
            GiveBack(b).run(results["give_back"])
            b.target_runs(results["targets"])
    finally:
        b.stop_all()
    results["minutes"] = (time.time() - started) / 60
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
