"""Latency at a fixed request rate, 4,000 connections (`make bench-serve-rate`; issue 23's read
p99 target, docs/bench/serve/README.md "Fixed rate").

A closed loop of N connections keeps N requests in the system, so its latency is N divided by
the throughput (Little's law) whatever the server does per request: it measures capacity. The
latency a client meets below capacity is measured by offering a fixed rate: oha with `-q RATE
--latency-correction` (each request timed from when it was due, so a stalled server is not
forgiven for the requests it delayed). Each server of run.py (Cairn durable with group commit,
PostgreSQL JSONB behind bench/serve-pg) on a fresh store of 10,000 documents, pinned to core 0,
oha on core 1; GETs by id (and optionally POSTs) at each rate for --seconds (30 by default:
the first ~0.3 s of a run are the 4,000 connections' handshakes, which a 10 s run lets into
its p99). Reports: --out/<server>/<kind>-<conns>-<rate>-<round>.json and --out/results.md.

    python3 bench/serve/fixed_rate.py [--servers cairn,postgres] [--rates 5000,10000,15000]
        [--conns 4000] [--kinds get] [--seconds 30] [--repeat 2]
"""
import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (bench/serve/run.py: servers, oha, pinning)

LABEL = {"cairn": "Cairn (`cairn serve`, durable: logged)", "postgres": "PostgreSQL JSONB (bench/serve-pg)"}


def server(a, name):
    if name == "postgres":
        return run.Postgres(a.serve_pg)
    return run.Cairn(a.cairn, False)


def report(out, runs):
    """results.md: one row per server, kind and rate, each round's figures side by side."""
    lines = [
        "# Latency at a fixed rate (bench/serve/fixed_rate.py)",
        "",
        "oha `-q RATE --latency-correction`; milliseconds; per round (1, 2, ...). "
        "Load average (1 min) at the runs: %.1f to %.1f." % (
            min(r["loadavg"] for r in runs), max(r["loadavg"] for r in runs)),
        "",
        "| server | request | connections | offered/s | answered/s | p50 | p99 | p99.9 | non-2xx "
        "| errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    keys = sorted({(r["server"], r["kind"], r["conns"], r["rate"]) for r in runs})
    for key in keys:
        rs = [r for r in runs if (r["server"], r["kind"], r["conns"], r["rate"]) == key]
        col = lambda f: ", ".join(f(r) for r in rs)  # noqa: E731
        ms = lambda q: col(lambda r: "%.1f" % (r["latencyPercentiles"][q] * 1e3))  # noqa: E731
        lines.append("| %s | %s | %d | %d | %s | %s | %s | %s | %s | %s |" % (
            LABEL.get(key[0], key[0]), key[1].upper(), key[2], key[3],
            col(lambda r: "%.0f" % r["summary"]["requestsPerSec"]), ms("p50"), ms("p99"),
            ms("p99.9"),
            col(lambda r: str(sum(v for k, v in r["statusCodeDistribution"].items()
                                  if not k.startswith("2")))),
            col(lambda r: str(sum(r.get("errorDistribution", {}).values())))))
    with open(os.path.join(out, "results.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cairn", default="target/release/cairn")
    ap.add_argument("--oha", default="target/tools/bin/oha")
    ap.add_argument("--serve-pg", default="target/release/cairn-bench-serve-pg")
    ap.add_argument("--out", default="docs/bench/serve/fixed-rate")
    ap.add_argument("--servers", default="cairn,postgres")
    ap.add_argument("--rates", default="5000,10000,15000")
    ap.add_argument("--conns", type=int, default=4000)
    ap.add_argument("--kinds", default="get")
    ap.add_argument("--seconds", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=2)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    runs = []
    for rep in range(1, a.repeat + 1):
        for name in a.servers.split(","):
            srv = server(a, name)
            addr = srv.start()
            d = os.path.join(a.out, name)
            os.makedirs(d, exist_ok=True)
            try:
                post, get = run.requests(addr)
                for kind in a.kinds.split(","):
                    for rate in [int(x) for x in a.rates.split(",")]:
                        r = run.oha(a.oha, get if kind == "get" else post, a.conns, a.seconds,
                                    rate)
                        r.update(server=name, kind=kind, conns=a.conns, rate=rate, round=rep,
                                 when=time.strftime("%H:%M:%S", time.gmtime()),
                                 loadavg=os.getloadavg()[0])
                        path = os.path.join(d, f"{kind}-{a.conns}-{rate}-{rep}.json")
                        with open(path, "w") as f:
                            json.dump(r, f, indent=1)
                        runs.append(r)
                        print(name, rep, rate, run.row(kind.upper(), a.conns, r), flush=True)
                        time.sleep(1)
            finally:
                srv.stop()
    report(a.out, runs)


if __name__ == "__main__":
    main()
