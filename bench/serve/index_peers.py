#!/usr/bin/env python3
"""Issue 24's load test against PostgreSQL (`make bench-index-peers`; docs/bench/index).

For each round, each server in turn on a fresh store (the order of the index counts turns
with the round): `cairn serve` (durable, group commit)
and PostgreSQL 15 JSONB behind bench/serve-pg (synchronous_commit=on), each with 0, 1 and 4
secondary indexes declared on the empty collection `bench` (1: /radius; 4: /radius,
/country_code, /timestamp, /position/lat; PostgreSQL: btree expression indexes on
`(coll, (doc #> '{...}'), id)`), then PRELOAD documents whose /radius takes each of 0..99
exactly 100 times. Then, servers pinned to core 0, oha and the probe to core 1:

- range (configurations with an index): oha GETs `/bench?where=/radius&gte=V&lt=V+1&limit=100`,
  V among 0..99 (a URL file), closed loop at each of --range-conns: 100 documents per answer
  (checked on one query first);
- write: oha POSTs new documents (a body file of varied documents, one line each) at a fixed
  --rate with --latency-correction on --write-conns connections for --seconds: p99 with 0, 1
  and 4 indexes;
- feed lag (Cairn, during the write run): crates/cairn-server/examples/feed_probe.rs writes a
  document every 10 ms and follows /bench/_changes?feed=sse; lag = ack to arrival.

Before each round and after the last, fdatasync of 4 KiB on the disk under target/ is timed
(the VM's flushes are sometimes throttled). Reports: --out/<server>-<k>/<kind>-<rep>.json
(oha's, with loadavg and time), probe-<rep>.json, fsync.json; `--report DIR` writes
DIR/results.md (medians over the rounds, the issue's ratios).
"""

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (bench/serve/run.py: server starters, oha, pinning)

PRELOAD = 10_000
PATHS = ["/radius", "/country_code", "/timestamp", "/position/lat"]
SERVERS = ["cairn", "cairn-pages", "postgres"]
LABEL = {"cairn": "Cairn (`cairn serve`: logged, the default)",
         "cairn-logged": "Cairn (`cairn serve --logged`)",
         "cairn-pages": "Cairn (`cairn serve --flush-pages`)",
         "postgres": "PostgreSQL JSONB (bench/serve-pg)"}


def doc(i):
    """Document i: the load test's fields; /radius = i % 100, the rest varied."""
    return {
        "position": {"lat": 52.0 + (i * 31 % 1000) / 1000, "lon": 13.404954},
        "radius": i % 100,
        "cidr": "192.168.100.0/22",
        "country_code": f"C{i % 50}",
        "nearest_city": "Berlin",
        "timestamp": f"2026-11-27T12:{i // 60 % 60:02}:{i % 60:02}.{i:07}Z",
        "software_source_version": "cairn-bench 0.1.0 (a1b2c3d)",
    }


def http(method, url, body=None):
    req = urllib.request.Request(url, method=method, data=body and json.dumps(body).encode(),
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return r.status, json.loads(r.read() or b"null")


def declare(addr, k):
    for p in PATHS[:k]:
        name = p.strip("/").replace("/", "_")
        st, v = http("PUT", f"http://{addr}/bench/_index/{name}", {"path": p})
        if st != 200 or v.get("state") != "ready":
            sys.exit(f"index {name} on {addr}: {st} {v}")


def preload_cairn(addr):
    for start in range(0, PRELOAD, 1000):
        items = [{"id": f"{i:05d}", "doc": doc(i)} for i in range(start, start + 1000)]
        st, v = http("POST", f"http://{addr}/bench/_bulk", items)
        if st != 200 or any(r["status"] >= 300 for r in v["results"]):
            sys.exit(f"preload: {st}")


class Postgres(run.Postgres):
    """run.py's PostgreSQL peer, with this test's indexes and documents."""

    def __init__(self, serve_pg, k):
        super().__init__(serve_pg)
        self.k = k

    def load(self):
        declare(self.addr, self.k)
        rows = ",\n".join(
            "('bench', '{:05d}', '{}'::jsonb)".format(i, json.dumps(doc(i)).replace("'", "''"))
            for i in range(PRELOAD))
        self.psql(f"INSERT INTO docs (coll, id, doc) VALUES {rows};\nANALYZE docs;")


class Cairn:
    def __init__(self, cairn, k, logged=False, pages=False):
        self.cairn, self.k, self.logged, self.pages = cairn, k, logged, pages

    def start(self):
        self.p, self.dir, addr = run.start_server(self.cairn, False, False, self.logged,
                                                  self.pages)
        declare(addr, self.k)
        preload_cairn(addr)
        return addr

    def stop(self):
        self.p.terminate()
        self.p.wait()
        run.shutil.rmtree(self.dir, ignore_errors=True)


def fsync_ms(n=50):
    """Median time of a 4 KiB write + fdatasync on the disk under target/, ms."""
    fd, path = tempfile.mkstemp(dir=run.TARGET, prefix="fsync-probe-")
    try:
        t = []
        for i in range(n):
            os.pwrite(fd, os.urandom(4096), (i % 16) * 4096)
            t0 = time.perf_counter()
            os.fdatasync(fd)
            t.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(t)
    finally:
        os.close(fd)
        os.unlink(path)


def stamp(r):
    r["when"] = time.strftime("%H:%M:%S", time.gmtime())
    r["loadavg"] = os.getloadavg()[0]
    return r


def range_check(addr):
    """One query of the range run: exactly 100 documents, each with /radius in range."""
    st, v = http("GET", f"http://{addr}/bench?where=/radius&gte=42&lt=43&limit=100")
    items = v["items"]
    if st != 200 or len(items) != 100 or any(i["doc"]["radius"] != 42 for i in items):
        sys.exit(f"range query on {addr}: {st}, {len(items)} items")


def measure(a, name, k, srv, d, rep, files):
    addr = srv.start()
    try:
        if isinstance(srv, run.Postgres):
            with open(os.path.join(d, "..", "postgres-version.txt"), "w") as f:
                f.write(srv.version + "\n")
        # Writes first, at the same moment after start for every index count: a logged
        # server's first timed flush (30 s after start) would otherwise fall inside the write
        # runs that follow range runs and outside the others (docs/bench/index/README.md).
        post = ["-m", "POST", "-H", "content-type: application/json", "-Z", files["bodies"],
                f"http://{addr}/bench"]
        probe = None
        if name.startswith("cairn"):
            probe = subprocess.Popen(run.pin(1) + [a.probe, addr, "bench", str(a.seconds), "10"],
                                     stdout=subprocess.PIPE, text=True)
        r = stamp(run.oha(a.oha, post, a.write_conns, a.seconds, a.rate))
        r.update(rate=a.rate, conns=a.write_conns, seconds=a.seconds)
        with open(os.path.join(d, f"write-{rep}.json"), "w") as f:
            json.dump(r, f, indent=1)
        print(name, k, rep, run.row(f"POST k={k}", a.write_conns, r), flush=True)
        if probe:
            out = probe.communicate()[0]
            if probe.returncode != 0:
                sys.exit(f"feed probe failed: {probe.returncode}")
            p = stamp(json.loads(out))
            with open(os.path.join(d, f"probe-{rep}.json"), "w") as f:
                json.dump(p, f, indent=1)
            print(name, k, rep, "feed lag", p, flush=True)
        if k and a.range_conns:
            range_check(addr)
            with open(files["urls"], "w") as f:
                f.writelines(f"http://{addr}/bench?where=/radius&gte={v}&lt={v + 1}&limit=100\n"
                             for v in range(100))
            for conns in [int(c) for c in a.range_conns.split(",") if c]:
                r = stamp(run.oha(a.oha, ["--urls-from-file", files["urls"]], conns,
                                  a.seconds, 0))
                with open(os.path.join(d, f"range-{conns}-{rep}.json"), "w") as f:
                    json.dump(r, f, indent=1)
                print(name, k, rep, run.row(f"RANGE k={k}", conns, r), flush=True)
                time.sleep(1)
    finally:
        srv.stop()
    time.sleep(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cairn", default="target/release/cairn")
    ap.add_argument("--oha", default="target/tools/bin/oha")
    ap.add_argument("--serve-pg", default="target/release/cairn-bench-serve-pg")
    ap.add_argument("--probe", default="target/release/examples/feed_probe")
    ap.add_argument("--out", default="docs/bench/index/runs")
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--rate", type=int, default=2000, help="POSTs/s of the write runs")
    ap.add_argument("--write-conns", type=int, default=100)
    ap.add_argument("--range-conns", default="10,100",
                    help="connections of the range runs; empty: no range runs (writes only)")
    ap.add_argument("--indexes", default="0,1,4")
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--first-round", type=int, default=1)
    ap.add_argument("--report", metavar="DIR", help="only write DIR/results.md")
    a = ap.parse_args()
    if a.report:
        import index_report
        return index_report.write(a.report)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    os.makedirs(a.out, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="bench-index-")
    files = {"urls": os.path.join(tmp, "urls.txt"), "bodies": os.path.join(tmp, "bodies.txt")}
    with open(files["bodies"], "w") as f:
        f.writelines(json.dumps(doc(i)) + "\n" for i in range(PRELOAD, 3 * PRELOAD))
    fsync = []
    try:
        for rep in range(a.first_round, a.first_round + a.repeat):
            fsync.append({"round": rep, "when": time.strftime("%H:%M:%S", time.gmtime()),
                          "loadavg": os.getloadavg()[0], "fdatasync_4k_ms": fsync_ms()})
            print("fsync", fsync[-1], flush=True)
            # The index counts' order turns with the round, so that the machine's drift
            # (other users' builds and flushes) does not always fall on the same one.
            ks = [int(x) for x in a.indexes.split(",")]
            ks = ks[rep % len(ks):] + ks[:rep % len(ks)]
            for name in a.servers.split(","):
                for k in ks:
                    srv = (Postgres(a.serve_pg, k) if name == "postgres"
                           else Cairn(a.cairn, k, logged=name == "cairn-logged",
                                      pages=name == "cairn-pages"))
                    d = os.path.join(a.out, f"{name}-{k}")
                    os.makedirs(d, exist_ok=True)
                    measure(a, name, k, srv, d, rep, files)
        fsync.append({"round": "end", "when": time.strftime("%H:%M:%S", time.gmtime()),
                      "loadavg": os.getloadavg()[0], "fdatasync_4k_ms": fsync_ms()})
        print("fsync", fsync[-1], flush=True)
    finally:
        path = os.path.join(a.out, "fsync.json")
        old = json.load(open(path)) if os.path.exists(path) and a.first_round > 1 else []
        with open(path, "w") as f:
            json.dump(old + fsync, f, indent=1)
        run.shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
