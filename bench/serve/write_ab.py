"""A/B of `cairn serve` binaries, alternated: req/s, p50/p99 and the server's CPU per request.

run.py's server (pinned to core 0, 10,000 documents preloaded, durable) and oha in a closed
loop on core 1, 6 s a run; the server's user + system CPU from /proc, divided by the answers:

    python3 bench/serve/write_ab.py post|get CONNS[,CONNS...] ROUNDS BINARY [BINARY...]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402  (bench/serve/run.py: server starters, oha, pinning)

TICK = os.sysconf("SC_CLK_TCK")


def cpu_s(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def one(binary, conns, kind, secs=6):
    p, d, addr = run.start_server(binary, False, False)
    try:
        run.preload(addr)
        post, get = run.requests(addr)
        c0 = cpu_s(p.pid)
        r = run.oha("target/tools/bin/oha", post if kind == "post" else get, conns, secs, 0)
        c1 = cpu_s(p.pid)
    finally:
        p.terminate()
        p.wait()
        run.shutil.rmtree(d, ignore_errors=True)
    codes = r["statusCodeDistribution"]
    n = sum(int(v) for v in codes.values())
    ok = int(codes.get("201" if kind == "post" else "200", 0))
    return ("%s %s %d req/s %6.0f p50 %6.1f p99 %6.1f ms cpu/req %5.1f us non2xx %d load %.1f"
            % (os.path.basename(binary), kind, conns, r["summary"]["requestsPerSec"],
               r["latencyPercentiles"]["p50"] * 1e3, r["latencyPercentiles"]["p99"] * 1e3,
               (c1 - c0) / n * 1e6, n - ok, os.getloadavg()[0]))


def main():
    kind, conns, reps = sys.argv[1], [int(c) for c in sys.argv[2].split(",")], int(sys.argv[3])
    for _ in range(reps):
        for c in conns:
            for b in sys.argv[4:]:
                print(one(b, c, kind), flush=True)


if __name__ == "__main__":
    main()
