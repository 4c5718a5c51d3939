#!/usr/bin/env python3
"""Server CPU per GET under wrk (docs/bench/serve/README.md, "Session 18"): for each `cairn`
binary in turn, run.py's server (core 0, 10,000 documents preloaded) driven by wrk (one
thread on core 1, GETs of random preloaded ids, bench/serve/wrk_get.lua) for 6 s at 1,000,
4,000, 1,000 and 4,000 connections; per run GETs/s, wrk's user and system CPU seconds, and
the server's CPU seconds and microseconds per GET. With wrk the server's core, not the
generator's, is the limit (oha spends its whole core near 32,000 GETs/s).

Usage: wrk_cpu.py CAIRN [CAIRN...]   (WRK_CPU_CONNS="1000,4000,1000,4000")
"""

import os
import resource
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402
from get_ab import cpu_seconds  # noqa: E402

CONNS = [int(c) for c in os.environ.get("WRK_CPU_CONNS", "1000,4000,1000,4000").split(",")]
SECONDS = 6


def main():
    bins = sys.argv[1:]
    if not bins:
        sys.exit(__doc__)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    for cairn in bins:
        srv = run.Cairn(cairn, False)
        addr = srv.start()
        try:
            for conns in CONNS:
                s0 = cpu_seconds(srv.p.pid)
                p = subprocess.run(["/usr/bin/time", "-f", "wrk-cpu %U %S"]
                                   + run.wrk_cmd(addr, conns, SECONDS),
                                   capture_output=True, text=True, check=True)
                s1 = cpu_seconds(srv.p.pid)
                rps = run.wrk_report(p.stdout)["summary"]["requestsPerSec"]
                wrk = " ".join(ln for ln in p.stderr.splitlines() if ln.startswith("wrk-cpu"))
                per = (s1 - s0) / (rps * SECONDS) * 1e6 if rps else float("nan")
                print(f"{cairn} {conns} conns: {rps:,.0f} GETs/s, {wrk}, server {s1 - s0:.2f} s "
                      f"CPU, {per:.1f} us/GET, load {os.getloadavg()[0]:.1f}", flush=True)
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
