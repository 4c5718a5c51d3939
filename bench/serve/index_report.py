#!/usr/bin/env python3
"""The tables of `make bench-index-peers` (bench/serve/index_peers.py; docs/bench/index).

Reads RUNS/<server>-<k>/{write,range-<conns>,probe}-<round>.json and RUNS/fsync.json, writes
RUNS/../results.md: per configuration the median over the rounds of each figure (and its
rounds' min-max), the non-2xx answers and errors summed over all rounds, and issue 24's
ratios against its targets. Usage: index_report.py RUNS
"""

import glob
import json
import os
import re
import statistics
import sys

LABEL = {"cairn": "Cairn", "cairn-logged": "Cairn --logged", "cairn-pages": "Cairn --flush-pages",
         "postgres": "PostgreSQL"}


def load(runs):
    """(server, k, kind) -> {round: report}; kind is write, range-<conns> or probe."""
    out = {}
    for path in glob.glob(os.path.join(runs, "*-*", "*.json")):
        server, k = os.path.basename(os.path.dirname(path)).rsplit("-", 1)
        m = re.match(r"(write|probe|range-\d+)-(\d+)\.json$", os.path.basename(path))
        if m:
            with open(path) as f:
                out.setdefault((server, int(k), m[1]), {})[int(m[2])] = json.load(f)
    return out


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def ms(v):
    return "-" if v is None else f"{v * 1000:,.2f}"


def num(v):
    return "-" if v is None else f"{v:,.0f}"


def span(xs, f):
    xs = [x for x in xs if x is not None]
    return f"{f(min(xs))}-{f(max(xs))}" if xs else "-"


def oha_stats(reports):
    rs = [reports[k] for k in sorted(reports)]
    pct = lambda k: [r.get("latencyPercentiles", {}).get(k) for r in rs]
    bad = sum(v for r in rs for c, v in r.get("statusCodeDistribution", {}).items()
              if not c.startswith("2"))
    errs = sum(sum(r.get("errorDistribution", {}).values()) for r in rs)
    rps = [r["summary"]["requestsPerSec"] for r in rs]
    return {"rps": med(rps), "rps_all": rps, "p50": med(pct("p50")), "p99": med(pct("p99")),
            "p99_all": pct("p99"), "p999": med(pct("p99.9")), "bad": bad, "errs": errs,
            "n": len(rs), "load": [r.get("loadavg") for r in rs]}


def paired_ratio(data, s, k):
    """p99 with k indexes over p99 with none, in the same round: median and range."""
    a, b = data.get((s, k, "write"), {}), data.get((s, 0, "write"), {})
    rs = [a[r]["latencyPercentiles"]["p99"] / b[r]["latencyPercentiles"]["p99"]
          for r in sorted(a) if r in b]
    if not rs:
        return "-"
    return f"{med(rs):.2f}x; {min(rs):.2f}-{max(rs):.2f}"


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}x"


def write(runs):
    data = load(runs)
    servers = sorted({s for s, _, _ in data}, key=lambda s: list(LABEL).index(s))
    ks = sorted({k for _, k, _ in data})
    loads = [r.get("loadavg") for reps in data.values() for r in reps.values()]
    fsync = json.load(open(os.path.join(runs, "fsync.json")))
    rounds = sorted({r for reps in data.values() for r in reps})
    L = [f"# Issue 24 against PostgreSQL: {len(rounds)} rounds, medians\n",
         "Written by bench/serve/index_report.py from docs/bench/index/runs (oha's reports, "
         "probe outputs); how to read it: README.md. Load average (1 min) at the runs: "
         f"{min(loads):.1f} to {max(loads):.1f}. A 4 KiB write + fdatasync on the disk, "
         "median of 50, before each round and at the end: "
         + ", ".join(f"{f['fdatasync_4k_ms']:.2f} ms ({f['when']})" for f in fsync) + ".\n"]
    vfile = os.path.join(runs, "postgres-version.txt")
    if os.path.exists(vfile):
        L.append(f"PostgreSQL: {open(vfile).read().strip()}.\n")

    w = {(s, k): oha_stats(data[(s, k, "write")]) for s in servers for k in ks
         if (s, k, "write") in data}
    one = next(iter(data[(servers[0], ks[0], "write")].values()))
    L += ["## Write latency with 0, 1 and 4 indexes (fixed rate, latency-corrected)\n",
          f"POST of a new document at {one.get('rate')} req/s over {one.get('conns')} "
          f"connections for {one.get('seconds')} s, oha `-q {one.get('rate')} "
          "--latency-correction`; milliseconds.\n",
          "| server | indexes | req/s | p50 | p99 | p99 per round (1, 2, ...) | p99.9 | p99 / p99 at 0 indexes | the same, per round (median; range) | non-2xx | errors |",
          "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in servers:
        for k in ks:
            if (s, k) not in w:
                continue
            x = w[(s, k)]
            base = w.get((s, 0), {}).get("p99")
            per = ", ".join(ms(p) for p in x["p99_all"])
            paired = paired_ratio(data, s, k)
            L.append(f"| {LABEL[s]} | {k} | {num(x['rps'])} | {ms(x['p50'])} | {ms(x['p99'])} | "
                     f"{per} | {ms(x['p999'])} | {ratio(x['p99'], base)} | {paired} | {x['bad']} | "
                     f"{x['errs']} |")
    for s in [s for s in servers if s.startswith("cairn")]:
        c0, c1, c4 = (w.get((s, k), {}).get("p99") for k in (0, 1, 4))
        cp50 = [w.get((s, k), {}).get("p50") for k in (0, 1, 4)]
        if all(cp50):
            L.append(f"\n{LABEL[s]}'s p50 with 0, 1, 4 indexes: {', '.join(ms(v) for v in cp50)} ms "
                     f"(1 index {ratio(cp50[1], cp50[0])}, 4 indexes {ratio(cp50[2], cp50[0])}).")
        if c0 and c1 and c4:
            L.append(f"\nTarget (each index adds at most 15% to write p99), by the medians alone "
                     f"(the per-round spread decides whether they mean anything: README.md): "
                     f"{LABEL[s]} 1 index {ratio(c1, c0)} of none (at most 1.15x: "
                     f"{'met' if c1 <= 1.15 * c0 else 'NOT met'}); 4 indexes {ratio(c4, c0)} "
                     f"(at most 1.60x, 15% per index: {'met' if c4 <= 1.60 * c0 else 'NOT met'}).\n")

    kinds = sorted({kind for _, _, kind in data if kind.startswith("range-")},
                   key=lambda s: int(s.split("-")[1]))
    if kinds:
        L += ["## Range query returning 100 documents (closed loop)\n",
              "`GET /bench?where=/radius&gte=V&lt=V+1&limit=100` (V one of 0..99, 100 documents "
              "each), the same on serve-pg; req/s and milliseconds.\n",
              "| indexes | connections | Cairn req/s (rounds) | PostgreSQL req/s (rounds) | Cairn / PostgreSQL | Cairn p50 / p99 | PostgreSQL p50 / p99 | non-2xx | errors |",
              "|---|---|---|---|---|---|---|---|---|"]
        for k in ks:
            for kind in kinds:
                if ("cairn", k, kind) not in data or ("postgres", k, kind) not in data:
                    continue
                c = oha_stats(data[("cairn", k, kind)])
                p = oha_stats(data[("postgres", k, kind)])
                L.append(f"| {k} | {kind.split('-')[1]} | {num(c['rps'])} ({span(c['rps_all'], num)}) | "
                         f"{num(p['rps'])} ({span(p['rps_all'], num)}) | {ratio(c['rps'], p['rps'])} | "
                         f"{ms(c['p50'])} / {ms(c['p99'])} | {ms(p['p50'])} / {ms(p['p99'])} | "
                         f"{c['bad'] + p['bad']} | {c['errs'] + p['errs']} |")
        L.append("\nTarget: at least 2x PostgreSQL's throughput.\n")

    probes = {(s, k): data[(s, k, "probe")] for s in servers for k in ks
              if (s, k, "probe") in data}
    if probes:
        L += ["## Feed lag under the write load (Cairn)\n",
              "feed_probe: a PUT every 10 ms beside the write run above, followed over "
              "`_changes?feed=sse`; acknowledgement to arrival, milliseconds.\n",
              "| server | indexes | probe writes (all rounds) | missing | lag p50 | lag p99 | p99 per round (1, 2, ...) | max (all rounds) |",
              "|---|---|---|---|---|---|---|---|"]
        for (s, k), reps in probes.items():
            ps = [reps[r] for r in sorted(reps)]
            L.append(f"| {LABEL[s]} | {k} | {sum(p['writes'] for p in ps)} | {sum(p['missing'] for p in ps)} | "
                     f"{med([p['p50_ms'] for p in ps]):.2f} | {med([p['p99_ms'] for p in ps]):.2f} | "
                     + ", ".join(f"{p['p99_ms']:.2f}" for p in ps)
                     + f" | {max(p['max_ms'] for p in ps):.2f} |")
        L.append("\nTarget: p99 under 10 ms.\n")
    out = os.path.join(os.path.dirname(os.path.abspath(runs)), "results.md")
    with open(out, "w") as f:
        f.write("\n".join(L) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    write(sys.argv[1])
