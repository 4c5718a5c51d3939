"""Server CPU per POST with 0, 1 and 4 indexes (issue 24's write cost, apart from latency).

Starts `cairn serve` as bench/serve/index_peers.py does (pinned to core 0, indexes declared,
10,000 documents preloaded), then sends --n POSTs of new documents at a fixed rate with oha
and reads the server's user and system CPU time from /proc before and after: microseconds of
server CPU per write. Latency at a fixed rate rises with the server's busy share of its one
core, so this is the figure that explains write p99 moving with the index count.

    python3 bench/serve/write_cpu.py [--pages] [--indexes 0,1,4] [--repeat 3]
"""
import argparse
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import index_peers  # noqa: E402
import run  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    """User and system seconds of process pid (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cairn", default="target/release/cairn")
    ap.add_argument("--oha", default="target/tools/bin/oha")
    ap.add_argument("--pages", action="store_true",
                    help="the page-flushing mode (`--flush-pages`) instead of the logged default")
    ap.add_argument("--indexes", default="0,1,4")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rate", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--conns", type=int, default=100)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-write-cpu-")
    bodies = os.path.join(tmp, "bodies.txt")
    with open(bodies, "w") as f:
        f.writelines(json.dumps(index_peers.doc(i)) + "\n"
                     for i in range(index_peers.PRELOAD, 3 * index_peers.PRELOAD))
    for rep in range(a.repeat):
        for k in [int(x) for x in a.indexes.split(",")]:
            srv = index_peers.Cairn(a.cairn, k, pages=a.pages)
            addr = srv.start()
            try:
                u0, s0 = cpu_s(srv.p.pid)
                post = ["-m", "POST", "-H", "content-type: application/json", "-Z", bodies,
                        f"http://{addr}/bench"]
                r = run.oha(a.oha, post, a.conns, a.seconds, a.rate)
                u1, s1 = cpu_s(srv.p.pid)
                n = r["statusCodeDistribution"]["201"]
                print(json.dumps({
                    "round": rep, "indexes": k, "pages": a.pages, "posts": n,
                    "user_us": round((u1 - u0) / n * 1e6, 1),
                    "sys_us": round((s1 - s0) / n * 1e6, 1),
                    "p50_ms": round(r["latencyPercentiles"]["p50"] * 1e3, 2),
                    "p99_ms": round(r["latencyPercentiles"]["p99"] * 1e3, 2),
                    "loadavg": os.getloadavg()[0]}), flush=True)
            finally:
                srv.stop()
    run.shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
