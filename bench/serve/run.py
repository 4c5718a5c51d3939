#!/usr/bin/env python3
"""Load test of `cairn serve` with oha (`make bench-serve`; docs/bench/serve/README.md).

Starts the server on a fresh environment pinned to one core (taskset), preloads documents,
and drives it from the other core with oha: POST of the load test's JSON document, GET by id
(random ids among those preloaded), at each connection count. Closed loop: each connection
sends its next request when the previous one is answered, so the figures are the server's
capacity and the latency at that load (no coordinated-omission correction; a fixed-rate run
is `--rate`). Writes oha's JSON report of each run and a table, results.md, into
--out/durable or --out/lazy.
"""

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

DOC = {
    "position": {"lat": 52.520008, "lon": 13.404954},
    "radius": 25,
    "cidr": "192.168.100.0/22",
    "country_code": "DE",
    "nearest_city": "Berlin",
    "timestamp": "2026-11-27T12:00:00Z",
    "software_source_version": "cairn-bench 0.1.0 (a1b2c3d)",
}
PRELOAD = 10_000


def pin(core):
    """A taskset prefix for `core` when there are two cores or more and taskset exists."""
    if shutil.which("taskset") and (os.cpu_count() or 1) >= 2:
        return ["taskset", "-c", str(core)]
    return []


def start_server(cairn, lazy, no_group):
    d = tempfile.mkdtemp(prefix="cairn-bench-serve-")
    cmd = pin(0) + [cairn, "serve", d, "--listen", "127.0.0.1:0", "--max-in-flight", "8192"]
    if lazy:
        cmd.append("--lazy")
    if no_group:
        cmd.append("--no-group")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "listening on " not in line:
        p.kill()
        sys.exit(f"server did not start: {line!r}")
    return p, d, line.split("listening on ", 1)[1].strip()


def preload(addr):
    for start in range(0, PRELOAD, 1000):
        items = [{"id": f"{i:05d}", "doc": DOC} for i in range(start, start + 1000)]
        req = urllib.request.Request(
            f"http://{addr}/bench/_bulk",
            data=json.dumps(items).encode(),
            headers={"content-type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(req) as r:
            assert r.status == 200


def oha(oha_bin, args, conns, seconds, rate):
    cmd = pin(1) + [
        oha_bin, "--no-tui", "--output-format", "json",
        "-z", f"{seconds}s", "-c", str(conns),
        # Requests in flight at the deadline are answered and counted, not cut off as errors.
        "--wait-ongoing-requests-after-deadline",
    ]
    if rate:
        cmd += ["-q", str(rate), "--latency-correction"]
    out = subprocess.run(cmd + args, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def row(name, conns, r):
    s = r["summary"]
    p = r.get("latencyPercentiles", {})
    codes = r.get("statusCodeDistribution", {})
    ok = sum(v for k, v in codes.items() if k.startswith("2"))
    bad = sum(v for k, v in codes.items() if not k.startswith("2"))
    errors = sum(r.get("errorDistribution", {}).values())
    ms = lambda v: f"{v * 1000:.2f}" if v is not None else "-"
    return (
        f"| {name} | {conns} | {s['requestsPerSec']:.0f} | {ms(p.get('p50'))} | "
        f"{ms(p.get('p99'))} | {ms(p.get('p99.9'))} | {ok} | {bad} | {errors} |"
    )


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cairn", required=True)
    ap.add_argument("--oha", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--conns", default="1,100,1000")
    ap.add_argument("--lazy", action="store_true")
    ap.add_argument("--no-group", action="store_true", help="one commit per write (baseline)")
    ap.add_argument("--rate", type=int, default=0, help="fixed request rate (latency-corrected)")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    mode = ("lazy" if a.lazy else "durable") + ("-nogroup" if a.no_group else "")
    out = os.path.join(a.out, mode)
    os.makedirs(out, exist_ok=True)
    body = json.dumps(DOC)
    server, d, addr = start_server(a.cairn, a.lazy, a.no_group)
    rows = []
    try:
        preload(addr)
        for conns in [int(c) for c in a.conns.split(",")]:
            runs = [
                ("POST", ["-m", "POST", "-H", "content-type: application/json", "-d", body,
                          f"http://{addr}/bench"]),
                ("GET", ["--rand-regex-url", f"http://{addr}/bench/0[0-9]{{4}}"]),
            ]
            for name, args in runs:
                r = oha(a.oha, args, conns, a.seconds, a.rate)
                with open(os.path.join(out, f"{name.lower()}-{conns}.json"), "w") as f:
                    json.dump(r, f, indent=1)
                rows.append(row(name, conns, r))
                print(rows[-1], flush=True)
                time.sleep(1)
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(d, ignore_errors=True)
    head = (
        f"`cairn serve` ({mode}), oha, {a.seconds} s per run, closed loop"
        + (f" at {a.rate} req/s, latency-corrected" if a.rate else "")
        + f"; server on core 0, oha on core 1 ({os.cpu_count()} cores).\n\n"
        "| request | connections | req/s | p50 ms | p99 ms | p99.9 ms | 2xx | non-2xx | errors |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write(head + "\n".join(rows) + "\n")


if __name__ == "__main__":
    main()
