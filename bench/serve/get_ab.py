#!/usr/bin/env python3
"""GETs at 100 and 4,000 connections against one or more `cairn` binaries in turn, with the
CPU each side used (docs/bench/serve/README.md, "4,000 connections"): run.py's server (core
0, 10,000 documents preloaded) and oha (core 1, closed loop, 6 s); per run oha's row, its
slowest connect (a dropped handshake waits a second for the retry), oha's user and system CPU
seconds, the server's CPU seconds over the run, and per GET: the server's CPU microseconds
and its threads' context switches (voluntary + involuntary, from /proc: how often a read's
hand-off to a reader thread and its answer back cost a switch). `perf` as the last argument
records the server during the 4,000-connection run into /tmp/perf-get.data.
GET_AB_CONNS (e.g. "100,1000,4000") replaces the connection counts.

Usage: get_ab.py CAIRN [CAIRN...] [perf]   (e.g. /tmp/cairn-old target/release/cairn)
"""

import json
import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402

CONNS = [int(c) for c in os.environ.get("GET_AB_CONNS", "100,4000").split(",")]


def cpu_seconds(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def switches(pid):
    """Context switches of all the process's threads so far (threads that ended are not
    counted: the server's threads live as long as it does)."""
    n = 0
    for t in os.listdir(f"/proc/{pid}/task"):
        try:
            for ln in open(f"/proc/{pid}/task/{t}/status"):
                if ln.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")):
                    n += int(ln.split()[1])
        except FileNotFoundError:
            pass  # a blocking-pool thread that ended meanwhile
    return n


def main():
    args = sys.argv[1:]
    prof = bool(args) and args[-1] == "perf"
    bins = args[:-1] if prof else args
    if not bins:
        sys.exit(__doc__)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    for cairn in bins:
        srv = run.Cairn(cairn, False)
        addr = srv.start()
        _, get = run.requests(addr)
        try:
            for conns in CONNS:
                perf = None
                if prof and conns == int(os.environ.get("GET_AB_PERF_CONNS", "4000")):
                    perf = subprocess.Popen(["perf", "record", "-g", "-F", "999", "-p",
                                             str(srv.p.pid), "-o", "/tmp/perf-get.data", "--",
                                             "sleep", "5"], stderr=subprocess.DEVNULL)
                s0, w0 = cpu_seconds(srv.p.pid), switches(srv.p.pid)
                p = subprocess.run(["/usr/bin/time", "-f", "oha-cpu %U %S"]
                                   + run.oha_cmd("target/tools/bin/oha", get, conns, 6, 0),
                                   capture_output=True, text=True, check=True)
                s1, w1 = cpu_seconds(srv.p.pid), switches(srv.p.pid)
                if perf:
                    perf.wait()
                r = json.loads(p.stdout)
                n = sum(r.get("statusCodeDistribution", {}).values())
                oha_cpu = [ln for ln in p.stderr.splitlines() if ln.startswith("oha-cpu")]
                print(cairn, run.row("GET", conns, r),
                      f"slowest connect {r['details']['DNSDialup']['slowest']:.3f} s",
                      " ".join(oha_cpu), f"server cpu {s1 - s0:.2f} s",
                      f"{(s1 - s0) / n * 1e6:.1f} us/GET" if n else "no GETs",
                      f"{(w1 - w0) / n:.2f} switches/GET" if n else "",
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
