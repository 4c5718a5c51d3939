#!/usr/bin/env python3
"""Load test of `cairn serve` with oha (`make bench-serve`; docs/bench/serve/README.md).

Starts the server on a fresh environment pinned to one core (taskset), preloads documents,
and drives it from the other core with oha: POST of the load test's JSON document, GET by id
(random ids among those preloaded), at each connection count. Closed loop: each connection
sends its next request when the previous one is answered, so the figures are the server's
capacity and the latency at that load (no coordinated-omission correction; a fixed-rate run
is `--rate`). Writes oha's JSON report of each run and a table, results.md, into
--out/durable or --out/lazy.

With --peers (`make bench-serve-peers`), the same runs against each server named, one after
the other in one invocation, each started here on a fresh store and stopped after its runs:
`cairn` (the default: durable through the commit log, group commit), `cairn-logged` (the same,
named with `--logged`), `cairn-pages` (`--flush-pages`: every group commit flushes its pages, the
default before session 15), `cairn-nogroup` (`--no-group`: one transaction per request),
`flask` (the published comparison's setup: Flask + py-lmdb under gunicorn, sync=True;
bench/serve/flask_lmdb.py) and `postgres` (a throwaway PostgreSQL cluster under target/ with a
JSONB table, synchronous_commit=on, behind bench/serve-pg, axum + tokio-postgres). Every server
is pinned to core 0 (its helpers too: gunicorn's workers, PostgreSQL's backends), oha to core 1.
Optionally a 90/10 mix (--mix): two oha processes at once, reads on 90% of the connections and
POSTs on 10%. Reports go to --out/peers/<server>/<kind>-<conns>-<rep>.json; report.py turns
them into results.md and the plot. --paired starts a round's servers together and drives
them run by run in turn (server A's GETs at 1,000 connections, then B's, ...), so the two
figures a ratio compares are seconds apart on a machine whose speed drifts over minutes.
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
import urllib.error
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


def start_server(cairn, lazy, no_group, logged=False, pages=False):
    d = tempfile.mkdtemp(prefix="cairn-bench-serve-")
    cmd = pin(0) + [cairn, "serve", d, "--listen", "127.0.0.1:0", "--max-in-flight", "8192"]
    if lazy:
        cmd.append("--lazy")
    if logged:
        cmd.append("--logged")
    if pages:
        cmd.append("--flush-pages")
    if no_group:
        cmd.append("--no-group")
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if "listening on " not in line:
        p.kill()
        sys.exit(f"server did not start: {line!r}")
    return p, d, line.split("listening on ", 1)[1].strip()


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET = os.path.join(ROOT, "target")
VENV = os.path.join(TARGET, "bench-serve-venv")
# gunicorn's sync workers: (2 x cores) + 1 = 5 for the machine's 2 cores, gunicorn's own
# rule of thumb; they share the server's core 0 (as every server here is on one core).
FLASK_WORKERS = 5
# tokio-postgres connections (PostgreSQL backends) of the PostgreSQL peer: 8, four per core of
# the machine; the backends spend most of a durable write waiting on the WAL flush, which
# PostgreSQL shares between the commits waiting for it.
PG_POOL = 8


def free_port():
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def wait_http(addr, proc, secs=30):
    deadline = time.time() + secs
    while time.time() < deadline:
        if proc.poll() is not None:
            sys.exit(f"server exited: {proc.returncode}")
        try:
            urllib.request.urlopen(f"http://{addr}/bench/00000", timeout=1).read()
            return
        except urllib.error.HTTPError:
            return
        except Exception:
            time.sleep(0.2)
    sys.exit(f"server at {addr} did not answer")


class Flask:
    """gunicorn + Flask + py-lmdb on a fresh environment, 10,000 documents preloaded."""

    def start(self):
        self.dir = tempfile.mkdtemp(prefix="cairn-bench-flask-")
        py = os.path.join(VENV, "bin", "python")
        # Preload with py-lmdb directly (one transaction), before the workers open it.
        code = (
            "import sys, json; sys.path.insert(0, 'bench/serve'); import flask_lmdb; "
            f"d = json.loads(sys.argv[2]); flask_lmdb.preload(sys.argv[1], "
            f"{{f'{{i:05d}}': d for i in range({PRELOAD})}})"
        )
        subprocess.run([py, "-c", code, self.dir, json.dumps(DOC)], check=True, cwd=ROOT)
        addr = f"127.0.0.1:{free_port()}"
        env = dict(os.environ, BENCH_LMDB_DIR=self.dir)
        self.p = subprocess.Popen(
            pin(0) + [os.path.join(VENV, "bin", "gunicorn"), "-w", str(FLASK_WORKERS),
                      "-b", addr, "--backlog", "8192", "--log-level", "warning",
                      "--chdir", os.path.join(ROOT, "bench", "serve"), "flask_lmdb:app"],
            env=env, cwd=ROOT)
        wait_http(addr, self.p)
        return addr

    def stop(self):
        self.p.terminate()
        self.p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class Postgres:
    """A throwaway cluster under target/bench-serve-pg (initdb, pg_ctl on a unix socket), the
    JSONB table with 10,000 documents, and bench/serve-pg in front of it."""

    def __init__(self, pg_server):
        self.server = pg_server
        self.base = os.path.join(TARGET, "bench-serve-pg")
        self.data = os.path.join(self.base, "data")
        self.sock = os.path.join(self.base, "sock")

    def as_pg(self, cmd, **kw):
        # initdb and postgres refuse to run as root: as the postgres user when root.
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        return subprocess.run(cmd, check=True, **kw)

    def bin(self, name):
        return shutil.which(name) or os.path.join(self.bindir, name)

    def start(self):
        import glob
        dirs = sorted(glob.glob("/usr/lib/postgresql/*/bin"))
        self.bindir = dirs[-1] if dirs else ""
        shutil.rmtree(self.base, ignore_errors=True)
        os.makedirs(self.sock)
        if os.geteuid() == 0:
            shutil.chown(self.base, "postgres")
            shutil.chown(self.sock, "postgres")
        self.as_pg([self.bin("initdb"), "-D", self.data, "-U", "bench", "-A", "trust",
                    "--no-sync", "-E", "UTF8"], stdout=subprocess.DEVNULL)
        opts = (f"-k {self.sock} -c listen_addresses='' -c synchronous_commit=on -c fsync=on "
                "-c max_connections=50 -c shared_buffers=256MB")
        self.as_pg(pin(0) + [self.bin("pg_ctl"), "-D", self.data, "-w", "-l",
                             os.path.join(self.base, "log"), "-o", opts, "start"],
                   stdout=subprocess.DEVNULL)
        self.as_pg([self.bin("createdb"), "-h", self.sock, "-U", "bench", "bench"])
        conninfo = f"host={self.sock} user=bench dbname=bench"
        self.p = subprocess.Popen(pin(0) + [self.server, "127.0.0.1:0", conninfo, str(PG_POOL)],
                                  stdout=subprocess.PIPE, text=True)
        line = self.p.stdout.readline()
        if "listening on " not in line:
            self.p.kill()
            sys.exit(f"serve-pg did not start: {line!r}")
        self.addr = line.split("listening on ", 1)[1].strip()
        self.load()
        self.version = subprocess.run([self.bin("postgres"), "--version"], capture_output=True,
                                      text=True).stdout.strip()
        return self.addr

    def psql(self, sql):
        """Runs SQL (read from stdin, so it may be long) in the bench database."""
        self.as_pg([self.bin("psql"), "-q", "-v", "ON_ERROR_STOP=1", "-h", self.sock, "-U",
                    "bench", "bench", "-f", "-"], input=sql, text=True)

    def load(self):
        """The preload: PRELOAD copies of DOC under ids 00000... (bench/serve/index_peers.py
        loads its own)."""
        doc = json.dumps(DOC).replace("'", "''")
        self.psql("INSERT INTO docs SELECT 'bench', lpad(i::text, 5, '0'), "
                  f"'{doc}'::jsonb FROM generate_series(0, {PRELOAD - 1}) i; ANALYZE docs")

    def stop(self):
        self.p.terminate()
        self.p.wait()
        self.as_pg([self.bin("pg_ctl"), "-D", self.data, "-m", "fast", "-w", "stop"],
                   stdout=subprocess.DEVNULL)
        shutil.rmtree(self.base, ignore_errors=True)


class Cairn:
    def __init__(self, cairn, no_group, logged=False, pages=False):
        self.cairn, self.no_group, self.logged, self.pages = cairn, no_group, logged, pages

    def start(self):
        self.p, self.dir, addr = start_server(self.cairn, False, self.no_group, self.logged,
                                              self.pages)
        preload(addr)
        return addr

    def stop(self):
        self.p.terminate()
        self.p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


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


def oha_cmd(oha_bin, args, conns, seconds, rate):
    cmd = pin(1) + [
        oha_bin, "--no-tui", "--output-format", "json",
        "-z", f"{seconds}s", "-c", str(conns),
        # Requests in flight at the deadline are answered and counted, not cut off as errors.
        "--wait-ongoing-requests-after-deadline",
    ]
    if rate:
        cmd += ["-q", str(rate), "--latency-correction"]
    return cmd + args


def oha(oha_bin, args, conns, seconds, rate):
    out = subprocess.run(oha_cmd(oha_bin, args, conns, seconds, rate), capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def wrk_cmd(addr, conns, seconds):
    """wrk (Debian's package; one thread on core 1) running GETs by random preloaded id in a
    closed loop (bench/serve/wrk_get.lua, which prints its report in oha's JSON shape)."""
    lua = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wrk_get.lua")
    return pin(1) + ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "--timeout", "10s", "-s", lua,
                     f"http://{addr}"]


def wrk_report(out):
    """The report in wrk_cmd's output."""
    line = next(ln for ln in out.splitlines() if ln.startswith('{"summary"'))
    return json.loads(line)


def wrk_get(addr, conns, seconds):
    """A closed loop of GETs by random preloaded id with wrk (wrk_cmd), its report."""
    out = subprocess.run(wrk_cmd(addr, conns, seconds), capture_output=True, text=True,
                         check=True).stdout
    return wrk_report(out)


def requests(addr):
    body = json.dumps(DOC)
    post = ["-m", "POST", "-H", "content-type: application/json", "-d", body,
            f"http://{addr}/bench"]
    get = ["--rand-regex-url", f"http://{addr}/bench/0[0-9]{{4}}"]
    return post, get


def make_server(a, name):
    return {
        "cairn": lambda: Cairn(a.cairn, False),
        "cairn-logged": lambda: Cairn(a.cairn, False, logged=True),
        "cairn-pages": lambda: Cairn(a.cairn, False, pages=True),
        "cairn-nogroup": lambda: Cairn(a.cairn, True),
        "flask": lambda: Flask(),
        "postgres": lambda: Postgres(a.serve_pg),
    }[name]()


def save(d, name, rep, kind, conns, r):
    r["when"] = time.strftime("%H:%M:%S", time.gmtime())
    r["loadavg"] = os.getloadavg()[0]
    with open(os.path.join(d, f"{kind}-{conns}-{rep}.json"), "w") as f:
        json.dump(r, f, indent=1)
    print(name, rep, row(kind.upper(), conns, r), flush=True)


def point(a, name, d, addr, rep, conns, kinds, mix):
    """One server's runs at one connection count: each kind of `kinds`, then the mix if
    `mix`."""
    post, get = requests(addr)
    for kind in kinds:
        if kind == "get" and a.get_generator == "wrk" and not a.rate:
            r = wrk_get(addr, conns, a.seconds)
        else:
            r = oha(a.oha, post if kind == "post" else get, conns, a.seconds, a.rate)
        save(d, name, rep, kind, conns, r)
        time.sleep(1)
    if mix and conns >= 10:
        # 90/10: two oha processes at once on the same core, reads on 90% of the
        # connections, POSTs on the other 10% (closed loop each).
        w = conns // 10
        procs = [
            subprocess.Popen(oha_cmd(a.oha, get, conns - w, a.seconds, 0),
                             stdout=subprocess.PIPE, text=True),
            subprocess.Popen(oha_cmd(a.oha, post, w, a.seconds, 0),
                             stdout=subprocess.PIPE, text=True),
        ]
        res = [json.loads(p.communicate()[0]) for p in procs]
        for kind, r in zip(["mixget", "mixpost"], res):
            save(d, name, rep, kind, conns, r)
        time.sleep(1)


def peers(a):
    """The --peers mode: every server named, each on a fresh store, the same runs."""
    out = os.path.join(a.out, "peers")
    names = a.peers.split(",")
    conns_list = [int(c) for c in a.conns.split(",")]
    for rep in range(a.first_round, a.first_round + a.repeat):
        # --paired: every server of the round up at once (each on its fresh store, idle
        # while another is driven), and each run of one server followed at once by the
        # same run of the others, in an order that alternates between rounds; so the runs
        # a ratio compares are seconds apart, not the minutes of a server's whole set.
        groups = [names] if a.paired else [[n] for n in names]
        for group in groups:
            srvs, dirs, addrs = {}, {}, {}
            try:
                for name in group:
                    srv = make_server(a, name)
                    dirs[name] = os.path.join(out, name)
                    os.makedirs(dirs[name], exist_ok=True)
                    addrs[name] = srv.start()
                    srvs[name] = srv
                    if isinstance(srvs[name], Postgres):
                        with open(os.path.join(dirs[name], "version.txt"), "w") as f:
                            f.write(srvs[name].version + "\n")
                order = group if rep % 2 else list(reversed(group))
                for conns in conns_list:
                    if a.paired:
                        for kind in ["post", "get"]:
                            for name in order:
                                point(a, name, dirs[name], addrs[name], rep, conns, [kind],
                                      False)
                    else:
                        name = group[0]
                        point(a, name, dirs[name], addrs[name], rep, conns, ["post", "get"],
                              a.mix)
            finally:
                for srv in srvs.values():
                    srv.stop()


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
    ap.add_argument("--peers", default="", help="e.g. cairn,cairn-nogroup,flask,postgres")
    ap.add_argument("--serve-pg", default="target/release/cairn-bench-serve-pg")
    ap.add_argument("--repeat", type=int, default=1, help="--peers: rounds over the servers")
    ap.add_argument("--first-round", type=int, default=1,
                    help="--peers: number of the first round (to add rounds to a run's reports)")
    ap.add_argument("--mix", action="store_true", help="--peers: also the 90/10 mix")
    ap.add_argument("--paired", action="store_true",
                    help="--peers: all servers of a round up at once, each run of one server "
                         "right before the same run of the others (no mix)")
    ap.add_argument("--get-generator", choices=["oha", "wrk"], default="oha",
                    help="--peers: what drives the closed-loop GETs (wrk: bench/serve/wrk_get.lua;"
                         " oha's own core caps it near 32,000 GETs/s at 1,000 connections)")
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    if a.peers:
        return peers(a)
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
