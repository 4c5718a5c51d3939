#!/usr/bin/env python3
"""Tables and the plot of `make bench-serve-peers` (bench/serve/run.py --peers).

Reads DIR/<server>/<kind>-<conns>-<rep>.json (oha's reports) and writes DIR/results.md (per
server and connection count: the median over the rounds of req/s and of each percentile, the
sum of non-2xx answers and errors over all rounds, and Cairn's throughput over each peer's)
and DIR/peers.png (throughput against connections, POST and GET). Usage: report.py DIR
"""

import glob
import json
import os
import re
import statistics
import sys

SERVERS = ["cairn", "cairn-logged", "cairn-pages", "cairn-nogroup", "flask", "postgres"]
LABEL = {
    "cairn": "Cairn (group commit)",
    "cairn-logged": "Cairn --logged",
    "cairn-pages": "Cairn --flush-pages",
    "cairn-nogroup": "Cairn --no-group",
    "flask": "Flask+py-lmdb/gunicorn",
    "postgres": "PostgreSQL JSONB (axum)",
}


def load(d):
    runs = {}  # (server, kind, conns) -> [report]
    for path in glob.glob(os.path.join(d, "*", "*.json")):
        server = os.path.basename(os.path.dirname(path))
        m = re.match(r"(\w+)-(\d+)-(\d+)\.json$", os.path.basename(path))
        if not m:
            continue
        with open(path) as f:
            r = json.load(f)
        r["_round"] = int(m[3])
        runs.setdefault((server, m[1], int(m[2])), []).append(r)
    return runs


def stats(reports):
    med = lambda xs: statistics.median(xs) if xs else None
    pct = lambda k: med([r["latencyPercentiles"][k] for r in reports
                         if r.get("latencyPercentiles", {}).get(k) is not None])
    bad = sum(v for r in reports for k, v in r.get("statusCodeDistribution", {}).items()
              if not k.startswith("2"))
    errs = sum(sum(r.get("errorDistribution", {}).values()) for r in reports)
    rps = [r["summary"]["requestsPerSec"] for r in reports]
    return {
        "rps": med(rps), "min": min(rps), "max": max(rps), "n": len(rps),
        "p50": pct("p50"), "p99": pct("p99"), "p999": pct("p99.9"), "bad": bad, "errs": errs,
    }


def ms(v):
    return "-" if v is None else (f"{v * 1000:,.1f}" if v * 1000 >= 10 else f"{v * 1000:.2f}")


def num(v):
    return f"{v:,.0f}"


def main():
    d = sys.argv[1]
    runs = load(d)
    servers = [s for s in SERVERS if any(k[0] == s for k in runs)]
    conns = sorted({k[2] for k in runs})
    out = []
    for kind, title in [("post", "Durable POST (a new document, 2xx after its commit is on disk)"),
                        ("get", "GET by id (a random one of 10,000 preloaded documents)")]:
        out.append(f"## {title}\n")
        out.append("| server | conns | req/s (median) | min-max | p50 ms | p99 ms | p99.9 ms | "
                   "non-2xx | errors |")
        out.append("|---|---|---|---|---|---|---|---|---|")
        for c in conns:
            for s in servers:
                r = runs.get((s, kind, c))
                if not r:
                    continue
                t = stats(r)
                out.append(f"| {LABEL[s]} | {c:,} | {num(t['rps'])} | {num(t['min'])}-"
                           f"{num(t['max'])} | {ms(t['p50'])} | {ms(t['p99'])} | "
                           f"{ms(t['p999'])} | {t['bad']} | {t['errs']} |")
        out.append("")
        peers = [s for s in servers if s != "cairn"]
        out.append(f"Cairn (group commit) req/s over each peer's ({kind.upper()}, medians; in "
                   f"brackets the range of the ratios of single rounds):\n")
        out.append("| conns | " + " | ".join(f"/ {LABEL[s]}" for s in peers) + " |")
        out.append("|---|" + "---|" * len(peers))
        for c in conns:
            if not runs.get(("cairn", kind, c)):
                continue
            base = stats(runs[("cairn", kind, c)])["rps"]
            cells = []
            for s in peers:
                r = runs.get((s, kind, c))
                if not r:
                    cells.append("-")
                    continue
                cell = f"{base / stats(r)['rps']:.1f}x"
                mine = {x["_round"]: x["summary"]["requestsPerSec"]
                        for x in runs[("cairn", kind, c)]}
                per = [mine[x["_round"]] / x["summary"]["requestsPerSec"] for x in r
                       if x["_round"] in mine and x["summary"]["requestsPerSec"]]
                if len(per) > 1:
                    cell += f" ({min(per):.1f}-{max(per):.1f}x)"
                cells.append(cell)
            out.append(f"| {c:,} | " + " | ".join(cells) + " |")
        out.append("")
    mix = [(s, c) for s in servers for c in conns if runs.get((s, "mixget", c))]
    if mix:
        out.append("## 90/10 mix (two oha processes at once: GETs on 90% of the connections, "
                   "POSTs on 10%; no mix at 1 connection)\n")
        out.append("Each side's figure is its own median over the rounds; the reads share is "
                   "what the server gave each side, not a rate set by the client (each oha "
                   "process runs a closed loop).\n")
        out.append("| server | conns | total req/s | reads/s | writes/s | reads share | "
                   "GET p99 ms | POST p99 ms | non-2xx | errors |")
        out.append("|---|---|---|---|---|---|---|---|---|---|")
        for c in conns:
            for s in servers:
                if (s, c) not in mix:
                    continue
                g, p = stats(runs[(s, "mixget", c)]), stats(runs.get((s, "mixpost", c), []) or
                                                           runs[(s, "mixget", c)])
                tot = g["rps"] + p["rps"]
                out.append(f"| {LABEL[s]} | {c:,} | {num(tot)} | {num(g['rps'])} | "
                           f"{num(p['rps'])} | {g['rps'] / tot:.0%} | {ms(g['p99'])} | "
                           f"{ms(p['p99'])} | {g['bad'] + p['bad']} | {g['errs'] + p['errs']} |")
        out.append("")
    whens = sorted(r["when"] for rs in runs.values() for r in rs if "when" in r)
    loads = [r["loadavg"] for rs in runs.values() for r in rs if "loadavg" in r]
    rounds = max(len(rs) for rs in runs.values())
    try:
        from importlib.metadata import version
        py = ", ".join(f"{p} {version(p)}" for p in ["flask", "gunicorn", "lmdb"])
    except Exception:
        py = "versions unknown"
    try:
        with open(os.path.join(d, "postgres", "version.txt")) as f:
            pg = f.read().strip()
    except OSError:
        pg = "PostgreSQL"
    head = [
        "# `make bench-serve-peers`: `cairn serve` and its peers in one run\n",
        f"Generated by bench/serve/report.py from the oha reports beside it. Runs between "
        f"{whens[0] if whens else '?'} and {whens[-1] if whens else '?'} UTC, {rounds} "
        f"round(s) over the servers; each figure is the median over the rounds (min-max: the "
        f"rounds' range), non-2xx and errors are summed over them.",
        "",
        f"**Shared, loaded machine**: 2 cores shared with other engineers' builds, 1-minute "
        f"load average {min(loads):.1f} to {max(loads):.1f} during these runs "
        f"(a quiet machine is 0); the virtual disk's flush time moves with their I/O. Rounds "
        f"of one point differ by up to 2x (see min-max), more for the mix. Read ratios as "
        f"orders of magnitude.",
        "",
        "Every server on core 0 (with its helpers: gunicorn workers, PostgreSQL backends), "
        "oha on core 1 (`taskset`), closed loop, HTTP/1.1, loopback, 10,000 documents "
        "preloaded. Servers:",
        "",
        "- **Cairn**: `cairn serve --max-in-flight 8192` (durable group commit; since session "
        "15 durable through the commit log, `--logged`, the default).",
        "- **Cairn --flush-pages**: the same, each group commit flushing its pages (the "
        "default before).",
        "- **Cairn --no-group**: the same, one transaction (one flush) per write.",
        f"- **Flask+py-lmdb/gunicorn** ({py}): bench/serve/flask_lmdb.py, 5 sync workers "
        "(gunicorn's 2 x cores + 1), `lmdb.open(sync=True)`; sync workers close the "
        "connection after each answer (no keep-alive), as gunicorn's default worker does.",
        f"- **PostgreSQL JSONB (axum)** ({pg}): a throwaway cluster (initdb under target/, "
        "unix socket, `synchronous_commit=on`, `fsync=on`, shared_buffers 256MB), table "
        "`docs(coll text, id text, doc jsonb, primary key (coll, id))`, behind bench/serve-pg "
        "(axum + tokio-postgres, 8 connections, prepared statements, one autocommit INSERT "
        "per POST).",
        "",
    ]
    with open(os.path.join(d, "results.md"), "w") as f:
        f.write("\n".join(head + out))
    print("\n".join(out))

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, kind in zip(axes, ["post", "get"]):
        for s in servers:
            xs = [c for c in conns if runs.get((s, kind, c))]
            ys = [stats(runs[(s, kind, c)])["rps"] for c in xs]
            ax.plot(xs, ys, marker="o", label=LABEL[s])
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(conns)
        ax.set_xticklabels([f"{c:,}" for c in conns])
        ax.set_xlabel("concurrent connections (oha, closed loop)")
        ax.set_ylabel("requests/s (median of runs)")
        ax.set_title("durable POST" if kind == "post" else "GET by id")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle("JSON document servers, one core each, on a shared, loaded 2-core machine")
    fig.tight_layout()
    fig.savefig(os.path.join(d, "peers.png"), dpi=110)


if __name__ == "__main__":
    main()
